"""Which figure of a phase is the headline, one rule for progress lines, plots and reports."""

from __future__ import annotations

# On a GPU, the allocator's reserved or in-use peak is what the card gives the framework.
DEVICE_PEAKS = ("reserved_peak", "allocator_peak", "peak_bytes_in_use")


def headline(phase: dict, device: str) -> tuple[int, str]:
    """(bytes, what they are) for one phase: host peak RSS on the CPU, the allocator's peak on a GPU."""
    if device == "cuda":
        for name in DEVICE_PEAKS:
            if name in phase["allocator"]:
                figure = phase["allocator"][name]
                return figure["bytes"], f"allocator {name} ({figure['semantics']})"
    figure = phase["host"]["peak_rss"]
    return figure["bytes"], f"host peak RSS ({figure['semantics']})"
