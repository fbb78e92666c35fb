"""Framework-neutral model specs: pure data from which every framework builds the same net.

A spec is a graph of layers: each layer names its inputs (the model's input is called `input`); a layer
that names none takes the layer before it, so a plain list is a chain. Shapes exclude the batch axis and
are channels-last (H, W, C) or flat (F,); this is the canonical layout. Weights are canonical too: conv
kernels (kh, kw, in / groups, out), dense (in, out), batch norm scale, offset, mean and variance (C,).
Nothing here imports a framework, so the orchestrator and the estimate can use it anywhere.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace
from functools import cached_property

from models.layers.activation import (
    ELU,
    GELU,
    HardSigmoid,
    HardSwish,
    LeakyReLU,
    Mish,
    PReLU,
    ReLU,
    ReLU6,
    Sigmoid,
    SiLU,
    Softplus,
)
from models.layers.base import (
    INTERPOLATIONS,
    MAX_CONFIG_BYTES,
    MAX_SIZE,
    PADDINGS,
    Shape,
    SpecError,
    conv_output_size,
    flag,
    number,
    pixels,
    positive,
    same_padding,
)
from models.layers.conv import Conv2D, ConvTranspose2D
from models.layers.linear import Dense, Dropout
from models.layers.merge import Add, Concat, Multiply, Subtract
from models.layers.normalization import (
    BatchNorm,
    GroupNorm,
    InstanceNorm,
    LayerNorm,
    LayerScale,
    Normalize,
    Rescale,
)
from models.layers.pooling import AdaptiveAvgPool2D, AvgPool2D, GlobalAvgPool, MaxPool2D
from models.layers.resize import Resize2D, Upsample2D
from models.layers.shaping import (
    ChannelShuffle,
    ChannelSlice,
    Crop2D,
    Flatten,
    Pad2D,
    Reshape,
    SpaceToDepth,
    ZeroPad2D,
)

LOSSES = ("mse", "cross_entropy")
MODEL_INPUT = "input"  # the name by which a layer takes the model's input
INPUT = -1  # ... and its index among a layer's inputs
# The layer kinds live in models.layers, a module per family; callers take them, and their checks, from here.
__all__ = [
    "AdaptiveAvgPool2D", "Add", "AvgPool2D", "BatchNorm", "CODE_NUMBERS", "ChannelShuffle", "ChannelSlice",
    "Concat", "Conv2D", "ConvTranspose2D", "Crop2D", "Dense", "Dropout", "ELEMENTWISE", "ELU", "Flatten", "GELU",
    "GlobalAvgPool", "GroupNorm", "HardSigmoid", "HardSwish", "INPUT", "INTERPOLATIONS", "InstanceNorm",
    "LAYER_TYPES", "LOSSES", "Layer", "LayerNorm", "LayerScale", "LayerShapes", "LeakyReLU", "MAX_CONFIG_BYTES",
    "MAX_SIZE", "MODEL_INPUT", "MaxPool2D", "Mish", "ModelSpec", "Multiply", "NODE_KEYS", "Normalize", "PADDINGS",
    "PReLU", "Pad2D", "ReLU", "ReLU6", "Rescale", "Reshape", "Resize2D", "Shape", "SiLU", "Sigmoid", "Softplus",
    "SpaceToDepth", "SpecError", "Subtract", "Upsample2D", "ZeroPad2D", "at_input_size", "conv_output_size", "flag",
    "number", "pixels", "positive", "same_padding", "written_channels_last",
]


Layer = (Conv2D | MaxPool2D | AvgPool2D | AdaptiveAvgPool2D | GlobalAvgPool | BatchNorm | Dense | Dropout | Flatten
         | ReLU | ReLU6 | SiLU | Sigmoid | HardSigmoid | HardSwish | GELU | LeakyReLU | ELU | Softplus | Mish
         | LayerNorm | LayerScale | Rescale | Normalize | ZeroPad2D | Crop2D | ChannelSlice | ChannelShuffle
         | Upsample2D | Reshape | Add | Concat | Multiply | GroupNorm | InstanceNorm | PReLU | Pad2D
         | ConvTranspose2D | Resize2D | SpaceToDepth | Subtract)
LAYER_TYPES: dict[str, type] = {cls.kind: cls for cls in (
    Conv2D, MaxPool2D, AvgPool2D, AdaptiveAvgPool2D, GlobalAvgPool, BatchNorm, Dense, Dropout, Flatten, ReLU, ReLU6,
    SiLU, Sigmoid, HardSigmoid, HardSwish, GELU, LeakyReLU, ELU, Softplus, Mish, LayerNorm, LayerScale, Rescale,
    Normalize, ZeroPad2D, Crop2D, ChannelSlice, ChannelShuffle, Upsample2D, Reshape, Add, Concat, Multiply, GroupNorm,
    InstanceNorm, PReLU, Pad2D, ConvTranspose2D, Resize2D, SpaceToDepth, Subtract)}
# The layers that compute one value from one value: the same shape out, nothing held (the estimate's activations)
ELEMENTWISE = ("relu", "relu6", "silu", "sigmoid", "hard_sigmoid", "hard_swish", "gelu", "leaky_relu", "elu",
               "softplus", "mish", "layerscale", "rescale", "normalize", "prelu")
NODE_KEYS = ("name", "inputs", "block")  # what a layer entry may say besides its type and options
# Options a compiler's code takes as a mere number: a dropout's rate is a threshold and a scale, so dropouts that differ
# in nothing else (EfficientNet's stochastic depth, its rate rising block by block) cost XLA's CPU about what a repeat
# does, not what a new layer does (docs/estimate.md).
CODE_NUMBERS: dict[str, tuple[str, ...]] = {"dropout": ("rate",)}


@dataclass(frozen=True)
class LayerShapes:
    """One layer with the shapes it sees, so adapters and estimates never re-derive them.

    `inputs` are indices of earlier layers, INPUT (-1) for the model's input; `params` are trainable,
    `statistics` are state the layer updates itself (batch norm's running mean and variance)."""

    index: int
    layer: Layer
    name: str
    block: str
    inputs: tuple[int, ...]
    input_shapes: tuple[Shape, ...]
    output_shape: Shape
    params: dict[str, Shape]
    statistics: dict[str, Shape]

    @property
    def input_shape(self) -> Shape:
        return self.input_shapes[0]

    @property
    def param_count(self) -> int:
        return sum(math.prod(s) for s in self.params.values())

    @property
    def statistics_count(self) -> int:
        return sum(math.prod(s) for s in self.statistics.values())

    @property
    def weights(self) -> dict[str, Shape]:
        """Every array the layer holds, in the order the canonical weights list them."""
        return self.params | self.statistics

    @property
    def compiled_as(self) -> tuple[str, tuple[Shape, ...]]:
        """What a compiler's code for the layer depends on: its kind and options, but those it takes as a mere number
        (CODE_NUMBERS), and its input shapes. Layers alike in this reuse one layer's code."""
        numbers = {name: getattr(type(self.layer), name) for name in CODE_NUMBERS.get(self.layer.kind, ())}
        return repr(replace(self.layer, **numbers)), self.input_shapes


@dataclass(frozen=True)
class ModelSpec:
    """`inputs[i]` are the indices layer i reads (INPUT for the model's input), in topological order; None is a
    chain. `outputs` are the layers the net returns (None: the last layer alone): an FPN's levels, a detection
    head's scales, deep supervision's and auxiliary heads' outputs; training sums one `loss` per output, equally
    weighted. `names` and `blocks` (a label a block-wise technique cuts at) are optional."""

    name: str
    input_shape: Shape
    layers: tuple[Layer, ...]
    loss: str
    default_batch: int = 1
    description: str = ""
    inputs: tuple[tuple[int, ...], ...] | None = None
    names: tuple[str, ...] | None = None
    blocks: tuple[str, ...] | None = None
    outputs: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        if not self.name:
            raise SpecError("a spec needs a non-empty name")
        for size in self.input_shape:
            positive(size, "input_shape entries")
        if len(self.input_shape) not in (1, 3):
            raise SpecError(f"input_shape must be (H, W, C) or (F,), got {self.input_shape}")
        if not self.layers:
            raise SpecError("a spec needs at least one layer")
        if self.loss not in LOSSES:
            raise SpecError(f"loss must be one of {', '.join(LOSSES)}, got {self.loss!r}")
        positive(self.default_batch, "default_batch")
        for extra, what in ((self.inputs, "inputs"), (self.names, "names"), (self.blocks, "blocks")):
            if extra is not None and len(extra) != len(self.layers):
                raise SpecError(f"spec {what} must name one entry per layer")
        if self.names is not None and len(set(self.names)) != len(self.names):
            raise SpecError("layer names must be unique")
        if self.outputs is not None and (not self.outputs or len(set(self.outputs)) != len(self.outputs) or
                                         not all(0 <= index < len(self.layers) for index in self.outputs)):
            raise SpecError(f"spec outputs must name distinct layers, at least one, got {self.outputs}")
        self._check_graph()
        for index, out in zip(self.output_layers, self.output_shapes, strict=True):
            if self.loss == "cross_entropy" and len(out) != 1:
                raise SpecError(f"cross_entropy needs a flat output of class scores, got shape {out} at "
                                f"{self.layer_name(index)!r}")

    def layer_name(self, index: int) -> str:
        return self.names[index] if self.names else f"layer{index}"

    def layer_inputs(self, index: int) -> tuple[int, ...]:
        return self.inputs[index] if self.inputs is not None else (index - 1 if index else INPUT,)

    def _check_graph(self) -> None:
        """Inputs come before their reader and each layer's count fits its type; every layer feeds an output."""
        for index, layer in enumerate(self.layers):
            sources = self.layer_inputs(index)
            least, most = layer.arity
            fits = least <= len(sources) and (most is None or len(sources) <= most)
            if fits and all(INPUT <= source < index for source in sources):
                continue
            where = f"layer {self.layer_name(index)!r} ({layer.kind})"  # named only when wrong: a deep net has many
            if not fits:
                wanted = "one input" if most == 1 else f"at least {least} inputs"
                raise SpecError(f"{where} takes {wanted}, got {len(sources)}")
            raise SpecError(f"{where} reads a layer that does not come before it")
        needed, pending = set(self.output_layers), list(self.output_layers)
        while pending:
            for source in self.layer_inputs(pending.pop()):
                if source != INPUT and source not in needed:
                    needed.add(source)
                    pending.append(source)
        unused = [self.layer_name(index) for index in range(len(self.layers)) if index not in needed]
        if unused:
            ends = ", ".join(repr(self.layer_name(index)) for index in self.output_layers)
            raise SpecError(f"layer {unused[0]!r} feeds no output (the outputs: {ends})")

    def walk(self) -> list[LayerShapes]:
        """Every layer with its input, output and parameter shapes (raises SpecError naming the layer on a mismatch).

        Worked out once per spec (it is frozen): the sizes, counts and the estimate walk it many times, which for a
        deep net would cost more than the estimate itself. The LayerShapes are shared: read them, never change them."""
        return list(self._shapes)

    @cached_property
    def _shapes(self) -> tuple[LayerShapes, ...]:
        result: list[LayerShapes] = []
        for index, layer in enumerate(self.layers):
            sources = self.layer_inputs(index)
            shapes = tuple(self.input_shape if source == INPUT else result[source].output_shape for source in sources)
            try:
                out = layer.output_shape(*shapes)
                params, statistics = layer.param_shapes(shapes[0]), layer.statistics_shapes(shapes[0])
            except SpecError as error:
                raise SpecError(f"layer {self.layer_name(index)!r}: {error}") from error
            result.append(LayerShapes(index, layer, self.layer_name(index), self.blocks[index] if self.blocks else "",
                                      sources, shapes, out, params, statistics))
        return tuple(result)

    def consumers(self) -> dict[int, list[int]]:
        """The layers that read each layer's output (and INPUT's), in order, and for each of the net's outputs the
        loss last, as a reader at `len(layers)`: an output lives to the end and is never overwritten in place, even
        where later layers read it too (an FPN's level). Worked out once per spec, as `walk`: the graph runner and
        the techniques ask for it per layer. Shared: read it, never change it."""
        return self._readers

    @cached_property
    def _readers(self) -> dict[int, list[int]]:
        readers: dict[int, list[int]] = {INPUT: []} | {index: [] for index in range(len(self.layers))}
        for index in range(len(self.layers)):
            for source in self.layer_inputs(index):
                readers[source].append(index)
        for index in self.output_layers:
            readers[index].append(len(self.layers))
        return readers

    @property
    def is_chain(self) -> bool:
        return self.inputs is None

    @property
    def output_layers(self) -> tuple[int, ...]:
        """The layers the net returns, in the order it returns them (and the losses and targets go)."""
        return self.outputs if self.outputs is not None else (len(self.layers) - 1,)

    @property
    def output_shapes(self) -> tuple[Shape, ...]:
        return tuple(self._shapes[index].output_shape for index in self.output_layers)

    @cached_property
    def distinct_layers(self) -> int:
        """How many layers differ in kind, options or input shapes (`LayerShapes.compiled_as`): a compiler builds
        code for each, which a layer that repeats one (a ResNet's identical blocks) reuses; XLA's runtime grows with
        these (docs/estimate.md)."""
        return len({shapes.compiled_as for shapes in self.walk()})

    @cached_property
    def param_count(self) -> int:
        """Trainable values: what torch's parameters() and Keras's trainable weights count (counted once, as walk)."""
        return sum(step.param_count for step in self._shapes)

    @cached_property
    def statistics_count(self) -> int:
        """Non-trainable state (batch norm's running statistics): torch's buffers, Keras's non-trainable weights."""
        return sum(step.statistics_count for step in self._shapes)

    def weight_bytes(self, bytes_per_value: int = 4) -> int:
        """The trainable weights' bytes (what gradients and optimizer state are sized by)."""
        return self.param_count * bytes_per_value

    def statistics_bytes(self, bytes_per_value: int = 4) -> int:
        return self.statistics_count * bytes_per_value

    def _reads_the_layer_before(self, index: int) -> bool:
        return self.layer_inputs(index) == ((index - 1 if index else INPUT),)

    def to_dict(self) -> dict:
        """The JSON form, as short as the format allows (records carry it): options at their default and inputs
        that are the layer before are left out, as a user may leave them out."""
        layers = []
        linked = not all(self._reads_the_layer_before(index) for index in range(len(self.layers)))
        for index, layer in enumerate(self.layers):
            entry = {"type": layer.kind} | _layer_fields(layer)
            if not self.is_chain or self.names:
                entry["name"] = self.layer_name(index)
            if not self.is_chain and not (linked and self._reads_the_layer_before(index)):
                entry["inputs"] = [MODEL_INPUT if source == INPUT else self.layer_name(source)
                                   for source in self.layer_inputs(index)]
            if self.blocks and self.blocks[index]:
                entry["block"] = self.blocks[index]
            layers.append(entry)
        return {
            "name": self.name,
            "input_shape": list(self.input_shape),
            "loss": self.loss,
            "default_batch": self.default_batch,
            "description": self.description,
            "layers": layers,
        } | ({"outputs": [self.layer_name(index) for index in self.outputs]} if self.outputs is not None else {})

    @classmethod
    def from_dict(cls, data: object) -> ModelSpec:
        if not isinstance(data, dict):
            raise SpecError("a spec must be a JSON object")
        allowed = {"name", "input_shape", "loss", "layers", "default_batch", "description", "outputs"}
        _reject_unknown(data, allowed, "spec")
        missing = sorted({"name", "input_shape", "loss", "layers"} - data.keys())
        if missing:
            raise SpecError(f"spec is missing {', '.join(missing)}")
        if not isinstance(data["layers"], list) or not isinstance(data["input_shape"], list):
            raise SpecError("spec 'layers' and 'input_shape' must be lists")
        if not all(isinstance(entry, dict) and "type" in entry for entry in data["layers"]):
            raise SpecError("each layer must be an object with a 'type'")
        entries = _topological(data["layers"])
        graph = any("inputs" in entry for entry in entries)
        names = tuple(entry.get("name", f"layer{index}") for index, entry in enumerate(entries))
        index_of = {name: index for index, name in enumerate(names)} | {MODEL_INPUT: INPUT}
        blocks = tuple(str(entry.get("block", "")) for entry in entries)
        return cls(
            name=str(data["name"]),
            input_shape=tuple(data["input_shape"]),
            layers=tuple(_layer_from_dict(entry, index) for index, entry in enumerate(entries)),
            loss=data["loss"],
            default_batch=data.get("default_batch", 1),
            description=str(data.get("description", "")),
            inputs=tuple(tuple(index_of[name] for name in _input_names(entries, index))
                         for index in range(len(entries))) if graph else None,
            names=names if any("name" in entry for entry in entries) else None,
            blocks=blocks if any(blocks) else None,
            outputs=_outputs(data.get("outputs"), index_of),
        )


def _outputs(written: object, index_of: dict[str, int]) -> tuple[int, ...] | None:
    """The layers the spec's `outputs` names (None where it names none: the last layer is the output)."""
    if written is None:
        return None
    if not isinstance(written, list) or not written or not all(isinstance(name, str) for name in written):
        raise SpecError(f"spec outputs must be a non-empty list of layer names, got {written!r}")
    unknown = [name for name in written if index_of.get(name, INPUT) == INPUT]
    if unknown:
        raise SpecError(f"spec outputs: unknown layer {unknown[0]!r}")
    return tuple(index_of[name] for name in written)


def _input_names(entries: list[dict], index: int) -> list[str]:
    """A layer's inputs as written, or the layer before it (the model's input for the first)."""
    if "inputs" in entries[index]:
        return entries[index]["inputs"]
    return [entries[index - 1].get("name", f"layer{index - 1}") if index else MODEL_INPUT]


def _topological(entries: list[dict]) -> list[dict]:
    """The layers in an order where each comes after its inputs, as close to the written one as that allows.

    Checks what only names can show: names that are unique strings, inputs that exist, no cycle."""
    names = [entry.get("name", f"layer{index}") for index, entry in enumerate(entries)]
    for index, (entry, name) in enumerate(zip(entries, names, strict=True)):
        if not isinstance(name, str) or not name or name == MODEL_INPUT:
            raise SpecError(f"layer {index}: name must be a non-empty string other than {MODEL_INPUT!r}, got {name!r}")
        inputs = entry.get("inputs", [])
        if not isinstance(inputs, list) or not all(isinstance(source, str) for source in inputs):
            raise SpecError(f"layer {name!r}: inputs must be a list of layer names, got {inputs!r}")
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise SpecError(f"layer name {name!r} is used twice")
        seen.add(name)
    position = {name: index for index, name in enumerate(names)}
    for index in range(len(entries)):
        for source in _input_names(entries, index):
            if source != MODEL_INPUT and source not in position:
                raise SpecError(f"layer {names[index]!r}: unknown input {source!r}")
    order = _inputs_first(entries, names, position)
    placed = [entries[index] for index in order]
    if order != list(range(len(entries))):  # reordered: a chain link (no 'inputs') must keep its written input
        placed = [entry if "inputs" in entry else entry | {"inputs": _input_names(entries, index)}
                  for entry, index in zip(placed, order, strict=True)]
    return placed


def _inputs_first(entries: list[dict], names: list[str], position: dict[str, int]) -> list[int]:
    """The layers' indices, each after its inputs: a depth-first walk from each layer in the written order through
    its inputs. It keeps its own stack (a deep net written out of order would pass Python's recursion limit) and
    names a cycle it meets."""
    order: list[int] = []
    state: dict[int, int] = {}  # 1 while on the path being walked, 2 once placed
    for start in range(len(entries)):
        if start in state:
            continue
        state[start] = 1
        path = [(start, iter(_input_names(entries, start)))]  # each layer on it with the inputs it has yet to place
        while path:
            index, sources = path[-1]
            source = next(sources, None)
            if source is None:
                state[index] = 2
                order.append(index)
                path.pop()
            elif source != MODEL_INPUT and state.get(position[source]) != 2:
                found = position[source]
                if state.get(found) == 1:
                    walked = [names[step] for step, _ in path]
                    cycle = walked[walked.index(names[found]):] + [names[found]]
                    raise SpecError(f"layer {names[found]!r} is in a cycle: {' -> '.join(cycle)}")
                state[found] = 1
                path.append((found, iter(_input_names(entries, found))))
    return order


def _layer_fields(layer: Layer) -> dict:
    """The options that differ from their defaults (required ones always)."""
    return {f.name: getattr(layer, f.name) for f in fields(layer) if getattr(layer, f.name) != f.default}


def written_channels_last(spec: ModelSpec) -> ModelSpec:
    """`spec`, as a person wrote it (a JSON spec), where its image input is not channels-first. Images are height,
    width, channels; a channels-first [3, 32, 32] would otherwise run, silently, as a 3-pixel-high image of 32
    channels. A first axis of 1, 3 or 4 (grey, RGB, RGBA) before a last one over 4 is almost surely that, where a
    person wrote it: an importer converts a file's own layout, so its (4, 4, 512) is what the file says."""
    shape = spec.input_shape
    if len(shape) == 3 and shape[0] in (1, 3, 4) and shape[2] > 4 and \
            any(isinstance(layer, Conv2D) for layer in spec.layers):
        raise SpecError(f"input_shape is height, width, channels (channels last); {list(shape)} looks channels-first: "
                        f"give {[shape[1], shape[2], shape[0]]}")
    return spec


def _reject_unknown(data: dict, allowed: set[str], what: str) -> None:
    unknown = sorted(data.keys() - allowed)
    if unknown:
        raise SpecError(f"unknown {what} key(s) {', '.join(unknown)}; valid: {', '.join(sorted(allowed)) or 'none'}")


def _layer_from_dict(entry: dict, index: int) -> Layer:
    """One layer's options; an error names the layer: by its name, else its position (in the order it runs)."""
    cls = LAYER_TYPES.get(entry["type"])
    where = f"layer {entry['name']!r}: " if "name" in entry else f"layer {index}: "
    if cls is None:
        raise SpecError(f"{where}unknown layer type {entry['type']!r}; valid: {', '.join(LAYER_TYPES)}")
    options = {key: value for key, value in entry.items() if key not in ("type", *NODE_KEYS)}
    try:
        _reject_unknown(options, {f.name for f in fields(cls)}, f"{cls.kind}")
        return cls(**options)
    except SpecError as error:
        raise SpecError(f"{where}{error}") from error
    except TypeError as error:  # a required option missing
        raise SpecError(f"{where}{cls.kind}: {error}") from error


def at_input_size(spec: ModelSpec, height: int, width: int) -> ModelSpec:
    """The same net on images of `height` x `width`: a fully convolutional net (a segmentation net) trains at sizes
    other than the one it was exported at. Refused, naming the layer, where the net fixes its size: a layer whose
    weights would change (a dense layer after a flatten) or that no longer fits (a reshape to fixed sizes)."""
    if len(spec.input_shape) != 3:
        raise SpecError(f"--size resizes an image input; {spec.name}'s is {list(spec.input_shape)}")
    positive(height, "--size's height")
    positive(width, "--size's width")
    h, w, channels = spec.input_shape
    sized = replace(spec, input_shape=(height, width, channels))
    try:
        steps = sized.walk()
    except SpecError as error:
        raise SpecError(f"at {height}x{width}: {error}; {spec.name} fixes its input size ({h}x{w})") from error
    for before, after in zip(spec.walk(), steps, strict=True):
        if before.weights != after.weights:
            raise SpecError(f"at {height}x{width}, layer {after.name!r} ({after.layer.kind}) would hold weights "
                            f"{list(after.weights.values())}, not its {list(before.weights.values())}: {spec.name} "
                            f"fixes its input size ({h}x{w})")
    return sized
