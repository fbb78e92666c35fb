"""XLA's best-fit-with-coalescing allocator (tsl's BFCAllocator) when its pool grows: what it counts as in use.

With JAX's pool off (XLA_PYTHON_CLIENT_PREALLOCATE=false) or TensorFlow's allow_growth, the BFC allocator maps
regions as it needs them, the first 2 MiB and each next one twice the last (or the request's size rounded up by
doubling). A request, rounded up to 256 bytes, takes the smallest free chunk that fits, which is split only if it is
at least twice the request or 128 MiB more: otherwise the whole chunk is in use. A fresh region just big enough is
not split, so the allocator's in-use figure (`peak_bytes_in_use`) counts more than the tensors. A preallocated pool
is one region far larger than any request, so every chunk is split and the figure is the tensors rounded.

Checked against the H100 run at c3d4247: simulated over the adapters' allocation order, the pool-off twins' build
peaks are 885.4, 112.5 and 3.8 MiB (keras200m, resnet50, heatmap68; measured the same) where the tensors are
787.9, 102.3 and 3.3; the regions it maps are the pool the driver sees (1,066 MiB for keras200m's build).
"""

from __future__ import annotations

from models.estimate.blocks import Blocks, Handle

MIN_ALLOCATION = 256
FIRST_REGION = 2 << 20
MAX_INTERNAL_FRAGMENTATION = 128 << 20


def rounded(size: int) -> int:
    return -(-size // MIN_ALLOCATION) * MIN_ALLOCATION


class GrowingPool:
    """The allocator's chunks by region; `in_use`, `peak_in_use` and `pool` in bytes, as its statistics count them."""

    def __init__(self) -> None:
        self.next_region, self.pool, self.in_use, self.peak_in_use = FIRST_REGION, 0, 0, 0
        self.chunks = Blocks()

    def allocate(self, size: int) -> Handle:
        """A chunk for `size` bytes (its handle for `release`)."""
        request = rounded(size)
        chunk = self.chunks.take(request)
        if chunk is None:
            self._extend(request)
            chunk = self.chunks.take(request)
        split = chunk[0] >= 2 * request or chunk[0] - request >= MAX_INTERNAL_FRAGMENTATION
        self.in_use += self.chunks.use(chunk, request, split)
        self.peak_in_use = max(self.peak_in_use, self.in_use)
        return chunk[1], chunk[2]

    def release(self, handle: Handle) -> None:
        """Frees a chunk, merged with a free neighbour on either side (in its region: regions do not coalesce)."""
        self.in_use -= self.chunks.release(handle)

    def _extend(self, request: int) -> None:
        grew = False
        while request > self.next_region:
            self.next_region *= 2
            grew = True
        size = self.next_region
        if not grew:
            self.next_region *= 2
        self.pool += size
        self.chunks.add_region(size)
