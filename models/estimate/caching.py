"""torch's CUDA caching allocator (c10/cuda/CUDACachingAllocator.cpp, default settings): what it reserves.

A request is rounded up to 512 bytes. Requests of 1 MiB or less come from the small pool, whose segments are
2 MiB; larger ones from the large pool, whose new segments are 20 MiB for requests under 10 MiB and the request
rounded up to 2 MiB otherwise. A request takes the smallest free block of its pool that fits (then the lower
address) and splits it where the rest is at least 512 bytes (small pool) or more than 1 MiB (large pool): otherwise
the whole block is in use. A freed block merges with its free neighbours in its segment, and segments are never
returned (short of empty_cache), so the driver sees every segment the allocator ever mapped: `reserved`.
"""

from __future__ import annotations

from models.estimate.blocks import Blocks, Handle

MIN_BLOCK = 512
SMALL_REQUEST = 1 << 20
SMALL_SEGMENT = 2 << 20
MID_SEGMENT = 20 << 20
LARGE_REQUEST = 10 << 20
LARGE_ROUNDING = 2 << 20


def rounded(size: int) -> int:
    return max(-(-size // MIN_BLOCK) * MIN_BLOCK, MIN_BLOCK)


def segment_size(request: int) -> int:
    if request <= SMALL_REQUEST:
        return SMALL_SEGMENT
    if request < LARGE_REQUEST:
        return MID_SEGMENT
    return -(-request // LARGE_ROUNDING) * LARGE_ROUNDING


class CachingAllocator:
    """Segments and blocks by pool; `allocated`, `peak_allocated`, `reserved` and `peak_reserved` in bytes."""

    def __init__(self) -> None:
        self.allocated = self.peak_allocated = self.reserved = self.peak_reserved = 0
        self.segments = Blocks()  # the pool of a segment: whether it is the small one

    def allocate(self, size: int) -> Handle:
        """A block for `size` bytes (its handle for `release`)."""
        request = rounded(size)
        small = request <= SMALL_REQUEST
        block = self.segments.take(request, small)
        if block is None:
            self.segments.add_region(segment_size(request), small)
            self.reserved += segment_size(request)
            self.peak_reserved = max(self.peak_reserved, self.reserved)
            block = self.segments.take(request, small)
        rest = block[0] - request
        self.allocated += self.segments.use(block, request, rest >= MIN_BLOCK if small else rest > SMALL_REQUEST)
        self.peak_allocated = max(self.peak_allocated, self.allocated)
        return block[1], block[2]

    def release(self, handle: Handle) -> None:
        self.allocated -= self.segments.release(handle)

    def empty_cache(self) -> None:
        """torch.cuda.empty_cache(): the segments with no block in use go back to the driver."""
        self.reserved -= self.segments.drop_empty_regions()

    def reset_peaks(self) -> None:
        self.peak_allocated, self.peak_reserved = self.allocated, self.reserved
