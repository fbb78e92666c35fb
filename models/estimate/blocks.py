"""Blocks carved from an allocator's regions, each free or in use: the bookkeeping XLA's BFC allocator
(`models.estimate.bfc`) and torch's caching allocator (`models.estimate.caching`) share.

Both take the smallest free block of a pool that fits a request, then the lower address, split it by a rule of
their own, and merge a freed block with the free blocks on either side of it in the same region (never across
regions). What differs, the regions' sizes, the pools and the split rule, stays with each allocator.
"""

from __future__ import annotations

from bisect import bisect_left, insort

Handle = tuple[int, int]  # (region, offset)


class Blocks:
    """The regions' blocks: `blocks` (region, offset) -> (size, in use); the free ones by pool, best fit first."""

    def __init__(self) -> None:
        self.blocks: dict[Handle, tuple[int, bool]] = {}
        self.starts: dict[Handle, int] = {}  # (region, end) -> the offset of the block ending there
        self.free: dict[object, list[tuple[int, int, int]]] = {}  # pool -> (size, region, offset), sorted
        self.sizes: dict[int, int] = {}  # region -> its size
        self.pool_of: dict[int, object] = {}

    def add_region(self, size: int, pool: object = None) -> None:
        region = len(self.pool_of)
        self.sizes[region], self.pool_of[region] = size, pool
        self._place(region, 0, size, in_use=False)

    def take(self, request: int, pool: object = None) -> tuple[int, int, int] | None:
        """The smallest free block of `pool` that fits `request` (then the lower address) as (size, region, offset),
        taken out of the free ones; None where none fits."""
        free = self.free.setdefault(pool, [])
        found = bisect_left(free, (request, -1, -1))
        return free.pop(found) if found < len(free) else None

    def use(self, block: tuple[int, int, int], request: int, split: bool) -> int:
        """Puts a taken block in use, its rest after `request` split off as a free block where `split`; the bytes
        now in use."""
        size, region, offset = block
        if split:
            self._place(region, offset + request, size - request, in_use=False)
            size = request
        self._place(region, offset, size, in_use=True)
        return size

    def release(self, handle: Handle) -> int:
        """Frees a block, merged with a free neighbour on either side; the bytes it had in use."""
        region, offset = handle
        size, _ = self.blocks.pop(handle)
        del self.starts[(region, offset + size)]
        freed = size
        following = (region, offset + size)
        if following in self.blocks and not self.blocks[following][1]:
            size += self._take_free(following)
        before = self.starts.get(handle)
        if before is not None and not self.blocks[(region, before)][1]:  # the block ending where this one starts
            size += self._take_free((region, before))
            offset = before
        self._place(region, offset, size, in_use=False)
        return freed

    def drop_empty_regions(self) -> int:
        """Removes the regions with nothing in use (torch's empty_cache); the bytes they held."""
        empty = [region for region, size in self.sizes.items() if self.blocks.get((region, 0)) == (size, False)]
        for region in empty:
            self._take_free((region, 0))
        return sum(self.sizes.pop(region) for region in empty)

    def _place(self, region: int, offset: int, size: int, in_use: bool) -> None:
        self.blocks[(region, offset)] = (size, in_use)
        self.starts[(region, offset + size)] = offset
        if not in_use:
            insort(self.free.setdefault(self.pool_of[region], []), (size, region, offset))

    def _take_free(self, handle: Handle) -> int:
        size, _ = self.blocks.pop(handle)
        del self.starts[(handle[0], handle[1] + size)]
        free = self.free[self.pool_of[handle[0]]]
        del free[bisect_left(free, (size, *handle))]
        return size
