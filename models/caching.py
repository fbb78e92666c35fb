"""torch's CUDA caching allocator (c10/cuda/CUDACachingAllocator.cpp, default settings): what it reserves.

A request is rounded up to 512 bytes. Requests of 1 MiB or less come from the small pool, whose segments are
2 MiB; larger ones from the large pool, whose new segments are 20 MiB for requests under 10 MiB and the request
rounded up to 2 MiB otherwise. A request takes the smallest free block of its pool that fits (then the lower
address) and splits it where the rest is at least 512 bytes (small pool) or more than 1 MiB (large pool): otherwise
the whole block is in use. A freed block merges with its free neighbours in its segment, and segments are never
returned (short of empty_cache), so the driver sees every segment the allocator ever mapped: `reserved`.
"""

from __future__ import annotations

from bisect import bisect_left, insort

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
        self.segments = 0
        self.segment_sizes: dict[int, int] = {}
        self.blocks: dict[tuple[int, int], tuple[int, bool]] = {}  # (segment, offset) -> (size, in use)
        self.starts: dict[tuple[int, int], int] = {}  # (segment, end) -> the offset of the block ending there
        self.small_segments: set[int] = set()
        self.free = {True: [], False: []}  # small pool?: [(size, segment, offset)], best fit first

    def allocate(self, size: int) -> tuple[int, int]:
        """A block for `size` bytes (its handle for `release`)."""
        request = rounded(size)
        small = request <= SMALL_REQUEST
        pool = self.free[small]
        found = bisect_left(pool, (request, -1, -1))
        if found < len(pool):
            block, segment, offset = pool.pop(found)
        else:
            block, segment, offset = segment_size(request), self.segments, 0
            self.segments += 1
            self.segment_sizes[segment] = block
            self.reserved += block
            self.peak_reserved = max(self.peak_reserved, self.reserved)
            if small:
                self.small_segments.add(segment)
        rest = block - request
        if rest >= MIN_BLOCK if small else rest > SMALL_REQUEST:
            self._put(segment, offset + request, rest, small)
            block = request
        self._set(segment, offset, block, True)
        self.allocated += block
        self.peak_allocated = max(self.peak_allocated, self.allocated)
        return segment, offset

    def release(self, handle: tuple[int, int]) -> None:
        segment, offset = handle
        size, _ = self.blocks.pop(handle)
        del self.starts[(segment, offset + size)]
        self.allocated -= size
        small = segment in self.small_segments
        following = self.blocks.get((segment, offset + size))
        if following and not following[1]:
            self._take(segment, offset + size, following[0], small)
            size += following[0]
        before = self.starts.get((segment, offset))
        if before is not None and not self.blocks[(segment, before)][1]:
            earlier = self.blocks[(segment, before)][0]
            self._take(segment, before, earlier, small)
            offset, size = before, size + earlier
        self._put(segment, offset, size, small)

    def empty_cache(self) -> None:
        """torch.cuda.empty_cache(): the segments with no block in use go back to the driver."""
        for small, pool in self.free.items():
            for size, segment, offset in list(pool):
                if offset == 0 and size == self.segment_sizes[segment]:
                    self._take(segment, offset, size, small)
                    self.reserved -= size
                    del self.segment_sizes[segment]

    def reset_peaks(self) -> None:
        self.peak_allocated, self.peak_reserved = self.allocated, self.reserved

    def _set(self, segment: int, offset: int, size: int, in_use: bool) -> None:
        self.blocks[(segment, offset)] = (size, in_use)
        self.starts[(segment, offset + size)] = offset

    def _put(self, segment: int, offset: int, size: int, small: bool) -> None:
        self._set(segment, offset, size, False)
        insort(self.free[small], (size, segment, offset))

    def _take(self, segment: int, offset: int, size: int, small: bool) -> None:
        pool = self.free[small]
        del pool[bisect_left(pool, (size, segment, offset))]
        del self.blocks[(segment, offset)]
        del self.starts[(segment, offset + size)]
