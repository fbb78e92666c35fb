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

from bisect import bisect_left, insort

MIN_ALLOCATION = 256
FIRST_REGION = 2 << 20
MAX_INTERNAL_FRAGMENTATION = 128 << 20


def rounded(size: int) -> int:
    return -(-size // MIN_ALLOCATION) * MIN_ALLOCATION


class GrowingPool:
    """The allocator's chunks by region; `in_use`, `peak_in_use` and `pool` in bytes, as its statistics count them."""

    def __init__(self) -> None:
        self.next_region, self.pool, self.in_use, self.peak_in_use = FIRST_REGION, 0, 0, 0
        self.regions = 0
        self.chunks: dict[tuple[int, int], tuple[int, bool]] = {}  # (region, offset) -> (size, in use)
        self.starts: dict[tuple[int, int], int] = {}  # (region, end) -> the offset of the chunk ending there
        self.free: list[tuple[int, int, int]] = []  # (size, region, offset): best fit first, then the lower address

    def allocate(self, size: int) -> tuple[int, int]:
        """A chunk for `size` bytes (its handle for `release`)."""
        request = rounded(size)
        found = bisect_left(self.free, (request, -1, -1))
        if found == len(self.free):
            self._extend(request)
            found = bisect_left(self.free, (request, -1, -1))
        chunk_size, region, offset = self.free.pop(found)
        if chunk_size >= 2 * request or chunk_size - request >= MAX_INTERNAL_FRAGMENTATION:
            self._place(region, offset + request, chunk_size - request, in_use=False)
            chunk_size = request
        self._place(region, offset, chunk_size, in_use=True)
        self.in_use += chunk_size
        self.peak_in_use = max(self.peak_in_use, self.in_use)
        return region, offset

    def release(self, handle: tuple[int, int]) -> None:
        """Frees a chunk, merged with a free neighbour on either side (in its region: regions do not coalesce)."""
        region, offset = handle
        size, _ = self.chunks.pop(handle)
        del self.starts[(region, offset + size)]
        self.in_use -= size
        following = (region, offset + size)
        if following in self.chunks and not self.chunks[following][1]:
            size += self._take_free(following)
        before = self.starts.get(handle)
        if before is not None and not self.chunks[(region, before)][1]:  # the chunk ending where this one starts
            size += self._take_free((region, before))
            offset = before
        self._place(region, offset, size, in_use=False)

    def _extend(self, request: int) -> None:
        grew = False
        while request > self.next_region:
            self.next_region *= 2
            grew = True
        size = self.next_region
        if not grew:
            self.next_region *= 2
        self.pool += size
        self._place(self.regions, 0, size, in_use=False)
        self.regions += 1

    def _place(self, region: int, offset: int, size: int, in_use: bool) -> None:
        self.chunks[(region, offset)] = (size, in_use)
        self.starts[(region, offset + size)] = offset
        if not in_use:
            insort(self.free, (size, region, offset))

    def _take_free(self, handle: tuple[int, int]) -> int:
        size, _ = self.chunks.pop(handle)
        del self.starts[(handle[0], handle[1] + size)]
        self.free.remove((size, *handle))
        return size
