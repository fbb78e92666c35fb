"""ShuffleNetV2's channel split and channel shuffle as PyTorch's exporters write them, read as the spec's
channel_slice and channel_shuffle layers.

torch.chunk (or split) of the channels is a SplitToSequence, read part by part by SequenceAt (the default
exporter), or a Split (the legacy one): each part becomes one channel_slice of the channels it keeps. torchvision's
channel_shuffle, `x.view(N, g, C // g, H, W).transpose(1, 2).contiguous().view(N, C, H, W)`, is a Reshape to five
axes, a Transpose of the two channel axes, an Identity per `.contiguous()` and a Reshape back: one channel_shuffle
when each tensor between them is read by the next node alone. Any other 5-D reshape is refused by the importer.
"""

from __future__ import annotations

from collections.abc import Callable

import onnx

SHUFFLE_PERM = (0, 2, 1, 3, 4)  # (N, g, C / g, H, W) -> (N, C / g, g, H, W)


def channel_bounds(channels: int, sizes: list[int]) -> list[tuple[int, int]] | None:
    """Each part's (start, stop) of the channels split into `sizes`; None when the sizes do not fill them exactly."""
    if any(size <= 0 for size in sizes) or sum(sizes) != channels:
        return None
    stops = [sum(sizes[:i + 1]) for i in range(len(sizes))]
    return [(stop - size, stop) for stop, size in zip(stops, sizes, strict=True)]


def chunked(channels: int, size: int) -> list[int]:
    """Parts of `size` channels, the last holding what remains (SplitToSequence's scalar split, torch.chunk)."""
    return [min(size, channels - start) for start in range(0, channels, size)] if size > 0 else []


def shuffle_tail(view: onnx.NodeProto, sole_reader: Callable[[str, str], onnx.NodeProto | None]
                 ) -> tuple[onnx.NodeProto, list[onnx.NodeProto]] | None:
    """The Reshape that ends a channel shuffle begun by the Reshape `view`, and the nodes between them (the
    Transpose of the two channel axes, any Identity); None when `view`'s readers are not that chain.
    `sole_reader(tensor, op_type)` is a tensor's one reader if it is of that op and no graph output."""
    transpose = sole_reader(view.output[0], "Transpose")
    perm = next((tuple(a.ints) for a in transpose.attribute if a.name == "perm"), None) if transpose else None
    if perm != SHUFFLE_PERM:
        return None
    between = [transpose]
    while (copy := sole_reader(between[-1].output[0], "Identity")) is not None:
        between.append(copy)
    back = sole_reader(between[-1].output[0], "Reshape")
    return (back, between) if back is not None else None
