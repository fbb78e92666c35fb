"""A memory timeline of bounded size, for the records: the worker's RSS samples and the orchestrator's NVML ones.

At most MAX_POINTS points are kept at any time (tens of KiB, so a run file holds one per scenario, and the
worker's own copy stays small inside the figures it measures): when the buffer fills, neighbouring points are
merged, each keeping the largest of every value it stands for, so every peak survives exactly.
"""

from __future__ import annotations

MAX_POINTS = 256


class Timeline:
    def __init__(self, max_points: int = MAX_POINTS) -> None:
        self.max_points = max_points
        self.points: list[list[float]] = []  # [time, value...], each the largest over `stride` samples
        self.stride, self._pending = 1, 0

    def add(self, moment: float, *values: int) -> None:
        if self._pending and self.points:  # fold into the last point, which stands for `stride` samples
            last = self.points[-1]
            for index, value in enumerate(values, start=1):
                last[index] = max(last[index], value)
        else:
            self.points.append([moment, *values])
        self._pending = (self._pending + 1) % self.stride
        if len(self.points) >= self.max_points:
            self.points = [[pair[0][0], *(max(p[i] for p in pair) for i in range(1, len(pair[0])))]
                           for pair in (self.points[i:i + 2] for i in range(0, len(self.points), 2))]
            self.stride, self._pending = self.stride * 2, 0

    def to_dict(self, columns: list[str], unit: int) -> dict:
        """[milliseconds since the first point, each value // `unit`]: short numbers, a small record."""
        start = self.points[0][0] if self.points else 0.0
        return {"start_monotonic_s": start, "columns": ["ms", *columns], "samples_per_point": self.stride,
                "points": [[round((point[0] - start) * 1000), *(int(v) // unit for v in point[1:])]
                           for point in self.points]}
