"""Framework-neutral model specs: pure data from which every framework builds the same net.

Shapes exclude the batch axis and are channels-last (H, W, C) or flat (F,); this is the
canonical layout. Weights are canonical too: conv kernels (kh, kw, in, out), dense (in, out).
Nothing here imports a framework, so the orchestrator and the estimate can use it anywhere.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, fields
from pathlib import Path
from typing import ClassVar

Shape = tuple[int, ...]

LOSSES = ("mse", "cross_entropy")
PADDINGS = ("same", "valid")


class SpecError(ValueError):
    """A spec that cannot describe a net; its message is one line meant for the user."""


def _positive(value: object, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise SpecError(f"{what} must be a positive integer, got {value!r}")
    return value


def _image(shape: Shape, layer: str) -> tuple[int, int, int]:
    if len(shape) != 3:
        raise SpecError(f"{layer} needs an image input (H, W, C), got shape {shape}")
    return shape  # type: ignore[return-value]


def conv_output_size(size: int, kernel: int, stride: int, padding: str) -> int:
    """Output length of a strided window, TensorFlow's rule (which JAX shares; torch is padded to match)."""
    if padding == "same":
        return math.ceil(size / stride)
    return (size - kernel) // stride + 1


def same_padding(size: int, kernel: int, stride: int) -> tuple[int, int]:
    """Padding (before, after) of TensorFlow's 'same': the odd pixel goes after."""
    total = max((conv_output_size(size, kernel, stride, "same") - 1) * stride + kernel - size, 0)
    return total // 2, total - total // 2


@dataclass(frozen=True)
class Conv2D:
    filters: int
    kernel: int = 3
    stride: int = 1
    padding: str = "same"
    bias: bool = True
    kind: ClassVar[str] = "conv2d"

    def __post_init__(self) -> None:
        _positive(self.filters, "conv2d.filters")
        _positive(self.kernel, "conv2d.kernel")
        _positive(self.stride, "conv2d.stride")
        if self.padding not in PADDINGS:
            raise SpecError(f"conv2d.padding must be one of {', '.join(PADDINGS)}, got {self.padding!r}")

    def output_shape(self, shape: Shape) -> Shape:
        h, w, _ = _image(shape, self.kind)
        out = tuple(conv_output_size(s, self.kernel, self.stride, self.padding) for s in (h, w))
        if min(out) <= 0:
            raise SpecError(f"conv2d with kernel {self.kernel} does not fit input {shape}")
        return (*out, self.filters)

    def param_shapes(self, shape: Shape) -> dict[str, Shape]:
        channels = _image(shape, self.kind)[2]
        kernel = {"kernel": (self.kernel, self.kernel, channels, self.filters)}
        return kernel | ({"bias": (self.filters,)} if self.bias else {})


@dataclass(frozen=True)
class MaxPool2D:
    pool: int = 2
    stride: int = 0  # 0 means "same as pool", Keras's and torch's default
    kind: ClassVar[str] = "maxpool2d"

    def __post_init__(self) -> None:
        _positive(self.pool, "maxpool2d.pool")
        if self.stride:
            _positive(self.stride, "maxpool2d.stride")

    @property
    def step(self) -> int:
        return self.stride or self.pool

    def output_shape(self, shape: Shape) -> Shape:
        h, w, c = _image(shape, self.kind)
        out = tuple(conv_output_size(s, self.pool, self.step, "valid") for s in (h, w))
        if min(out) <= 0:
            raise SpecError(f"maxpool2d of {self.pool} does not fit input {shape}")
        return (*out, c)

    def param_shapes(self, shape: Shape) -> dict[str, Shape]:
        return {}


@dataclass(frozen=True)
class Dense:
    units: int
    bias: bool = True
    kind: ClassVar[str] = "dense"

    def __post_init__(self) -> None:
        _positive(self.units, "dense.units")

    def output_shape(self, shape: Shape) -> Shape:
        if len(shape) != 1:
            raise SpecError(f"dense needs a flat input (add a flatten layer), got shape {shape}")
        return (self.units,)

    def param_shapes(self, shape: Shape) -> dict[str, Shape]:
        kernel = {"kernel": (shape[0], self.units)}
        return kernel | ({"bias": (self.units,)} if self.bias else {})


@dataclass(frozen=True)
class Flatten:
    """Flattens in channels-last order; frameworks that compute channels-first permute first."""

    kind: ClassVar[str] = "flatten"

    def output_shape(self, shape: Shape) -> Shape:
        return (math.prod(shape),)

    def param_shapes(self, shape: Shape) -> dict[str, Shape]:
        return {}


@dataclass(frozen=True)
class ReLU:
    kind: ClassVar[str] = "relu"

    def output_shape(self, shape: Shape) -> Shape:
        return shape

    def param_shapes(self, shape: Shape) -> dict[str, Shape]:
        return {}


Layer = Conv2D | MaxPool2D | Dense | Flatten | ReLU
LAYER_TYPES: dict[str, type] = {cls.kind: cls for cls in (Conv2D, MaxPool2D, Dense, Flatten, ReLU)}


@dataclass(frozen=True)
class LayerShapes:
    """One layer with the shapes it sees, so adapters and estimates never re-derive them."""

    index: int
    layer: Layer
    input_shape: Shape
    output_shape: Shape
    params: dict[str, Shape]

    @property
    def param_count(self) -> int:
        return sum(math.prod(s) for s in self.params.values())


@dataclass(frozen=True)
class ModelSpec:
    name: str
    input_shape: Shape
    layers: tuple[Layer, ...]
    loss: str
    default_batch: int = 1
    description: str = ""

    def __post_init__(self) -> None:
        if not self.name:
            raise SpecError("a spec needs a non-empty name")
        for size in self.input_shape:
            _positive(size, "input_shape entries")
        if len(self.input_shape) not in (1, 3):
            raise SpecError(f"input_shape must be (H, W, C) or (F,), got {self.input_shape}")
        if not self.layers:
            raise SpecError("a spec needs at least one layer")
        if self.loss not in LOSSES:
            raise SpecError(f"loss must be one of {', '.join(LOSSES)}, got {self.loss!r}")
        _positive(self.default_batch, "default_batch")
        out = self.walk()[-1].output_shape
        if self.loss == "cross_entropy" and len(out) != 1:
            raise SpecError(f"cross_entropy needs a flat output of class scores, got shape {out}")

    def walk(self) -> list[LayerShapes]:
        """Every layer with its input, output and parameter shapes (raises SpecError on a mismatch)."""
        result, shape = [], self.input_shape
        for index, layer in enumerate(self.layers):
            out = layer.output_shape(shape)
            result.append(LayerShapes(index, layer, shape, out, layer.param_shapes(shape)))
            shape = out
        return result

    @property
    def output_shape(self) -> Shape:
        return self.walk()[-1].output_shape

    @property
    def param_count(self) -> int:
        return sum(step.param_count for step in self.walk())

    def weight_bytes(self, bytes_per_value: int = 4) -> int:
        return self.param_count * bytes_per_value

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "input_shape": list(self.input_shape),
            "loss": self.loss,
            "default_batch": self.default_batch,
            "description": self.description,
            "layers": [{"type": layer.kind} | _layer_fields(layer) for layer in self.layers],
        }

    @classmethod
    def from_dict(cls, data: object) -> ModelSpec:
        if not isinstance(data, dict):
            raise SpecError("a spec must be a JSON object")
        allowed = {"name", "input_shape", "loss", "layers", "default_batch", "description"}
        _reject_unknown(data, allowed, "spec")
        missing = sorted({"name", "input_shape", "loss", "layers"} - data.keys())
        if missing:
            raise SpecError(f"spec is missing {', '.join(missing)}")
        if not isinstance(data["layers"], list) or not isinstance(data["input_shape"], list):
            raise SpecError("spec 'layers' and 'input_shape' must be lists")
        return cls(
            name=str(data["name"]),
            input_shape=tuple(data["input_shape"]),
            layers=tuple(_layer_from_dict(entry) for entry in data["layers"]),
            loss=data["loss"],
            default_batch=data.get("default_batch", 1),
            description=str(data.get("description", "")),
        )


def _layer_fields(layer: Layer) -> dict:
    return {f.name: getattr(layer, f.name) for f in fields(layer)}


def _reject_unknown(data: dict, allowed: set[str], what: str) -> None:
    unknown = sorted(data.keys() - allowed)
    if unknown:
        raise SpecError(f"unknown {what} key(s) {', '.join(unknown)}; valid: {', '.join(sorted(allowed))}")


def _layer_from_dict(entry: object) -> Layer:
    if not isinstance(entry, dict) or "type" not in entry:
        raise SpecError("each layer must be an object with a 'type'")
    cls = LAYER_TYPES.get(entry["type"])
    if cls is None:
        raise SpecError(f"unknown layer type {entry['type']!r}; valid: {', '.join(LAYER_TYPES)}")
    options = {key: value for key, value in entry.items() if key != "type"}
    _reject_unknown(options, {f.name for f in fields(cls)}, f"{cls.kind}")
    return cls(**options)


def load_spec_file(path: str | Path) -> ModelSpec:
    """Reads a user's spec; every failure becomes a one-line SpecError."""
    try:
        data = json.loads(Path(path).read_text())
    except OSError as exc:
        raise SpecError(f"cannot read spec file {path}: {exc.strerror}") from exc
    except json.JSONDecodeError as exc:
        raise SpecError(f"spec file {path} is not valid JSON: {exc.msg} at line {exc.lineno}") from exc
    try:
        return ModelSpec.from_dict(data)
    except TypeError as exc:  # a wrongly typed field reaching a dataclass
        raise SpecError(f"spec file {path}: {exc}") from exc
