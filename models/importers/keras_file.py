"""Keras models as specs: a saved `.keras` file, or the JSON of `model.to_json()`, becomes a ModelSpec.

Only the model's config is read (zipfile and json, no framework), so the orchestrator can estimate and run a
user's Keras net in every framework. Each Keras layer maps to the spec layers that hold the same weights and
compute the same thing; one that has no such counterpart is refused in one line naming the file, the layer
and its class, rather than approximated: a memory estimate of a different net would be silently wrong. So is a
config no Keras wrote: an option's value goes to the spec layer as written, whose own check refuses one of another
type (a `filters` of 2.5 is not 2, a `use_bias` of "no" not true), and a layer reading, or an output naming, a layer
that does not come before it is refused by name.

The loss comes from the file's compile config: mean squared error is `mse`, (sparse) categorical cross-entropy
is `cross_entropy`. A model saved uncompiled gets `cross_entropy` when its output is a softmax (a classifier, as
keras.applications builds them uncompiled), else `mse`, which fits any output shape and costs what
cross-entropy costs but for one small buffer of class scores. The output's softmax is then the loss's own.

A model used as a layer (keras.applications' ConvNeXt has a Sequential stem and downsampling blocks) is flattened
into the graph: its layers become the spec's, reading what the model reads, and its output is what its readers read.

The spec's layer names say where each layer came from, so `canonical_weights` can load Keras's own weights into
any framework: a layer holding weights is named as its Keras layer, a layer of a nested model `model/layer`, the two
halves of a SeparableConv2D `name/depthwise` and `name/pointwise`, an activation split out of a layer `name/relu`
(Keras names hold no '/').
"""

from __future__ import annotations

import lzma
import math
import zipfile
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from models.importers.fixes import Fix
from models.importers.json_text import parsed_json
from models.importers.keras_losses import shared_loss
from models.spec import (
    INTERPOLATIONS,
    LAYER_TYPES,
    MAX_CONFIG_BYTES,
    MODEL_INPUT,
    PADDINGS,
    MaxPool2D,
    ModelSpec,
    Shape,
    SpecError,
    flag,
    number,
    pixels,
    positive,
    same_padding,
)

if TYPE_CHECKING:
    import numpy as np

KERAS_MODELS = ("Sequential", "Functional", "Model")
# Keras's activations as spec layers; None: the identity, no layer. Keras's gelu is the exact one (gelu's default);
# Keras 3's hard_sigmoid is relu6(x + 3) / 6, the spec's (Keras 2's, 0.2 x + 0.5, is refused), hard_silu x times it.
ACTIVATIONS = {"relu": "relu", "relu6": "relu6", "silu": "silu", "swish": "silu", "sigmoid": "sigmoid",
               "hard_sigmoid": "hard_sigmoid", "hard_silu": "hard_swish", "hard_swish": "hard_swish", "gelu": "gelu",
               "leaky_relu": "leaky_relu", "elu": "elu", "softplus": "softplus", "mish": "mish", "linear": None}
# The options Keras's activation functions take by default where the spec's layer defaults to others: Keras's
# leaky_relu has slope 0.2 (its LeakyReLU layer 0.3, torch's 0.01, the spec's)
ACTIVATION_DEFAULTS = {"leaky_relu": {"negative_slope": 0.2}}
CONVS = ("Conv2D", "DepthwiseConv2D", "SeparableConv2D")
# outputs where a zero pad never wins a max: minus infinity's result
NONNEGATIVE = ("relu", "relu6", "sigmoid", "hard_sigmoid", "softplus")
# keras.ops called on a tensor and a number in a functional model (MobileNetV3's hard sigmoid, relu6(x + 3.0) * (1 / 6),
# is an Add, a ReLU layer and a Multiply): the spec's rescale, the number as its offset or its scale
OPERATIONS = {"Add": "offset", "Multiply": "scale"}
# InceptionResNetV2's residual, inputs[0] + inputs[1] * scale, a layer of keras.applications' own (module and name)
RESIDUAL_SCALE = ("keras.src.applications.inception_resnet_v2", "CustomScaleLayer")
# ... and on two tensors (ConvNeXt's residual, `inputs + x`): the spec's add and multiply
JOINS = {"Add": "add", "Multiply": "multiply"}
# keras.applications' ConvNeXt's own layer (module, class name): x * gamma, one trainable gamma per channel
LAYER_SCALE = ("keras.src.applications.convnext", "LayerScale")
# The slice of a Keras layer's weight list that each named part of it holds: SeparableConv2D's
# [depthwise kernel, pointwise kernel, bias] as a depthwise conv2d and a pointwise one
PARTS = {"depthwise": slice(0, 1), "pointwise": slice(1, None)}
# The compressions Python's zipfile reads (Keras writes deflate); a member in another (deflate64 is 9) is refused
READABLE = (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED, zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA)


class _Refused(Exception):
    """A layer with no counterpart: the message says why, the caller adds the file and the layer."""


# The packages whose registered classes Keras imports itself when it loads one (keras/src/saving/serialization_lib.py:
# the Keras team's model libraries); another package's class needs that package imported first, which a file must
# never make the suite do
KERAS_TEAM_PACKAGES = ("keras_hub", "keras_cv", "keras_nlp")


class RegisteredKerasClass(SpecError):
    """A `.keras` file of a registered Keras class (a keras-hub backbone, a functional subclass): its config holds
    the arguments the class is built with, not its layers, so only Keras with the class's `package` can build it."""

    def __init__(self, message: str, package: str) -> None:
        super().__init__(message)
        self.package = package


def is_keras_config(data: object) -> bool:
    """Whether parsed JSON is a Keras model's config (what `to_json()` writes) rather than a spec."""
    return isinstance(data, dict) and data.get("class_name") in KERAS_MODELS and "config" in data


def load_keras_file(path: str | Path) -> ModelSpec:
    """A `.keras` file (a zip whose config.json describes the model, metadata.json the Keras that saved it); weights
    are not read."""
    try:
        with zipfile.ZipFile(path) as archive:
            data = parsed_json(_member(archive, "config.json", path), f"{path}'s config.json")
            metadata = parsed_json(_member(archive, "metadata.json", path), f"{path}'s metadata.json") \
                if "metadata.json" in archive.namelist() else {}
    except OSError as exc:
        raise SpecError(f"cannot read Keras file {path}: {exc.strerror or exc}") from exc
    except (zipfile.BadZipFile, KeyError) as exc:
        raise SpecError(f"{path} is not a saved Keras model (a zip holding config.json)") from exc
    registered, module = (data.get(key) if isinstance(data, dict) else None for key in ("registered_name", "module"))
    if isinstance(registered, str) and ">" in registered and "layers" not in (
            data.get("config") if isinstance(data.get("config"), dict) else {}):
        package = (module if isinstance(module, str) else registered).split(".")[0].split(">")[0]
        raise RegisteredKerasClass(f"{path}: a registered Keras class, {registered} ({package}): its config holds the "
                                   f"arguments it is built with, not its layers; fix: {Fix.KERAS_REWRAP}", package)
    if not is_keras_config(data):
        raise SpecError(f"{path}: config.json holds no Sequential or functional Keras model")
    if not isinstance(metadata, dict):
        raise SpecError(f"{path}: its metadata.json is not an object (Keras writes its version there)")
    data.setdefault("keras_version", metadata.get("keras_version"))
    return spec_from_keras(data, str(path))


def _member(archive: zipfile.ZipFile, name: str, path: str | Path) -> bytes:
    """A member's bytes: one larger than a config may be is refused by the size it declares before it is read (a zip
    holds 2 GiB of JSON in 2 MB; zipfile reads no more than it declares), one encrypted or compressed in a way
    zipfile cannot read by its header, one whose bytes do not decompress to what its header says as corrupted."""
    info = archive.getinfo(name)
    if info.file_size > MAX_CONFIG_BYTES:
        raise SpecError(f"{path}: its {name} is {info.file_size:,} bytes, more than the {MAX_CONFIG_BYTES:,} a Keras "
                        f"config is read up to")
    if info.flag_bits & 0x1:
        raise SpecError(f"{path}: its {name} is encrypted; Keras saves it in the clear")
    if info.compress_type not in READABLE:
        raise SpecError(f"{path}: its {name} is compressed by method {info.compress_type}, which Python's zipfile "
                        f"cannot read (deflate64 is 9); Keras writes deflate")
    try:
        return archive.read(info)
    except (zipfile.BadZipFile, zlib.error, lzma.LZMAError, EOFError) as exc:
        raise SpecError(f"{path}: its {name} is corrupted ({exc})") from exc


def spec_from_keras(data: dict, source: str) -> ModelSpec:
    """The spec of a Keras model config; `source` names the file in every error. Keras 2's `to_json()` names its
    version (`keras_version`), Keras 3's does not."""
    try:
        return _Importer(source, str(data.get("keras_version") or "")).spec(data)
    except SpecError as exc:
        message = str(exc)
        raise SpecError(message if message.startswith(f"{source}:") else f"{source}: {message}") from exc


def canonical_weights(spec: ModelSpec, weights_by_layer: dict[str, list[np.ndarray]]) -> dict[str, np.ndarray]:
    """Keras's weights (each layer's `get_weights()`, by Keras layer name, a nested model's layers' by `model/layer`:
    frameworks/keras_reference.py's `layer_weights`) as the spec's canonical arrays
    `layer{index}_{name}`, what every adapter loads: a net imported from Keras then computes what Keras does.

    Keras lists a layer's arrays in the order the spec names them (kernel, bias; scale, offset, mean, variance;
    mean, variance, count), and each holds the canonical values in row-major order: a depthwise kernel
    (k, k, C, multiplier) is the canonical (k, k, 1, C x multiplier), a Dense on an image (in, out) the 1x1 conv's
    (1, 1, in, out). So each array is reshaped to its canonical shape, its size checked."""
    import numpy as np

    arrays = {}
    for step in spec.walk():
        if not step.weights:
            continue
        layer, part = step.name, ""
        if layer not in weights_by_layer and "/" in layer:  # a part of a Keras layer, or one renamed 'input/'
            layer, part = layer.rsplit("/", 1)
        if layer not in weights_by_layer:
            raise ValueError(f"spec layer {step.name!r}: no weights given for Keras layer {layer!r}")
        given = weights_by_layer[layer][PARTS[part]] if part in PARTS else weights_by_layer[layer]
        shapes = [np.shape(value) for value in given]
        if len(given) != len(step.weights) or any(math.prod(shape) != math.prod(wanted) for shape, wanted
                                                  in zip(shapes, step.weights.values(), strict=True)):
            raise ValueError(f"spec layer {step.name!r} holds {list(step.weights.values())}; Keras layer "
                             f"{layer!r} gives {shapes}")
        for (name, shape), value in zip(step.weights.items(), given, strict=True):
            arrays[f"layer{step.index}_{name}"] = np.asarray(value, dtype=np.float32).reshape(shape)
    return arrays


def _activation_name(value: object) -> object:
    """An activation's name, whether written as a string or (Keras 3) as a serialized function."""
    return value.get("config") if isinstance(value, dict) else value


def _pair(value: object) -> list:
    """Keras's per-axis pair, written as one value or a list of two; what each holds is the spec's to check."""
    return list(value) if isinstance(value, list) else [value, value]


def _square(value: object, what: str) -> int:
    """Keras's per-axis pair (or one int) as the spec's one size; a non-square one has no counterpart."""
    pair = _pair(value)
    if len(pair) != 2 or pair[0] != pair[1]:
        raise _Refused(f"{what} {value!r} is not square (the spec has one size for both axes)")
    return positive(pair[0], what)  # checked before the importer computes with it ('same' padding)


def _pads(value: object, what: str) -> tuple[int, int, int, int]:
    """ZeroPadding2D's padding or Cropping2D's cropping (an int, (height, width), or ((top, bottom), (left, right)))
    per side."""
    sides = [_pair(side) for side in _pair(value)]
    if len(sides) != 2 or any(len(side) != 2 for side in sides):
        raise _Refused(f"has {what} {value!r}: not an int, (height, width) or ((top, bottom), (left, right))")
    (top, bottom), (left, right) = ([pixels(size, what) for size in side] for side in sides)  # before it is compared
    return top, bottom, left, right


def _required(config: dict, key: str) -> object:
    """An option Keras always writes for the layer."""
    if key not in config:
        raise _Refused(f"has no {key!r} in its config; Keras writes one")
    return config[key]


def _padding(config: dict) -> str:
    """A conv's or pool's padding, Keras's 'same' or 'valid' (the spec reads a number as pixels: Keras writes none)."""
    padding = config.get("padding", "valid")
    if padding not in PADDINGS:
        raise _Refused(f"pads {padding!r}; the spec reads Keras's {' and '.join(map(repr, PADDINGS))}")
    return padding


def _layer_name(layer: object, index: int, prefix: str) -> str:
    """The name of a config's layer, which must be an object with a string class_name and an object config."""
    where = f"layer #{index} of model {prefix[:-1]!r}" if prefix else f"layer #{index}"
    if not isinstance(layer, dict) or not isinstance(layer.get("class_name"), str) or \
            not isinstance(layer.get("config", {}), dict):
        raise SpecError(f"{where} is not a Keras layer (an object with a class_name and a config object)")
    name = layer.get("config", {}).get("name") or layer.get("name") or f"layer{index}"
    if not isinstance(name, str):
        raise SpecError(f"{where}'s name {name!r} is not a string")
    return name


def _end_layers(ends: object, what: str) -> list[str]:
    """The layers a model's `input_layers` or `output_layers` names (one tensor, [name, 0, 0], or a list of them);
    none where it names none."""
    if not ends:
        return []
    listed = ends if isinstance(ends, list) and isinstance(ends[0], list) else [ends]
    for end in listed:
        if not isinstance(end, list) or not end or not isinstance(end[0], str):
            raise SpecError(f"the model's {what}_layers {ends!r} name no layer")
    return [end[0] for end in listed]




def _history_layer(history: object) -> str:
    """The layer a Keras 3 tensor's `keras_history` ([layer, node, tensor]) names."""
    if not isinstance(history, list) or not isinstance(history[0], str):
        raise _Refused(f"reads a tensor whose keras_history {history!r} names no layer")
    return history[0]


def _inbound(layer: dict) -> list[str]:
    """The names of the layers a functional layer reads, from Keras 3's tensors or Keras 2's node lists."""
    nodes = layer.get("inbound_nodes", [])
    if not isinstance(nodes, list):
        raise _Refused(f"has inbound_nodes {nodes!r}, not a list of calls")
    if len(nodes) > 1:
        raise _Refused("the layer is called more than once (shared layers have no counterpart in the spec)")
    if not nodes:
        return []
    found: list[str] = []

    def walk(item: object) -> None:
        if isinstance(item, dict):
            tensor = item.get("config") if item.get("class_name") == "__keras_tensor__" else None
            history = tensor.get("keras_history") if isinstance(tensor, dict) else None
            if history:
                found.append(_history_layer(history))
            else:
                for value in item.values():
                    walk(value)
        elif isinstance(item, list):
            if len(item) >= 3 and isinstance(item[0], str) and isinstance(item[1], int):  # Keras 2: [name, 0, 0, {}]
                found.append(item[0])
            else:
                for value in item:
                    walk(value)

    node = nodes[0]
    walk(node.get("args", []) if isinstance(node, dict) else node)
    return found


@dataclass
class _Importer:
    source: str
    keras_version: str  # "" when the config does not say (Keras 3's to_json())
    entries: list[dict] = field(default_factory=list)
    shapes: dict[str, Shape] = field(default_factory=dict)  # each spec name's output shape, for channel counts
    kinds: dict[str, str] = field(default_factory=dict)  # each spec name's layer type
    alias: dict[str, str] = field(default_factory=dict)  # Keras name -> the spec name of its output
    # a nested model's name, or its input layer's, -> the node whose output it stands for (its output, what it reads)
    flattened: dict[str, str] = field(default_factory=dict)
    readers: dict[str, list[dict]] = field(default_factory=dict)  # Keras name -> the Keras layers that read it
    padding: dict[str, int] = field(default_factory=dict)  # a folded ZeroPadding2D's pixels, owed to its one reader
    seen: set[str] = field(default_factory=set)  # the Keras names read so far: each names one layer
    input_shape: Shape | None = None
    outputs: list[str] = field(default_factory=list)  # the Keras names of the model's output layers, in order
    loss: str = "mse"

    def spec(self, data: dict) -> ModelSpec:
        config = data["config"]
        if not isinstance(config, dict):
            raise SpecError(f"the model's config {config!r} is not an object")
        sequential = data["class_name"] == "Sequential"
        if sequential:
            self.alias[MODEL_INPUT] = MODEL_INPUT  # what its first layer reads
            if config.get("build_input_shape"):
                self._input(config["build_input_shape"])
        nodes = self._nodes(config.get("layers", []), sequential)
        if not nodes:
            raise SpecError("the model has no layers")
        self.outputs = self._output_layers(config, nodes, sequential)
        missing = [output for output in self.outputs if output not in {name for name, _, _ in nodes}]
        if missing:
            raise SpecError(f"the model's output names {missing[0]!r}, none of its layers")
        self.loss = self._loss(data.get("compile_config") or {}, nodes)
        for name, layer, sources in nodes:
            with self._blamed(name, layer):
                if layer["class_name"] == "InputLayer":
                    self._input(layer.get("config", {}).get("batch_shape")
                                or layer.get("config", {}).get("batch_input_shape"))
                    self.alias[name] = MODEL_INPUT
                else:
                    if self.input_shape is None:
                        self._input(layer.get("config", {}).get("batch_input_shape"))
                    self._layer(name, layer, sources)
        ends = []
        for output in self.outputs:
            out = self.alias.get(output)
            if not any(entry["name"] == out for entry in self.entries):
                raise SpecError(f"the model's output {output!r} is no layer of it that computes a value")
            ends.append(out)
        if len(ends) == 1:  # the output last, as a spec of one output has it
            self.entries.append(self.entries.pop(next(i for i, e in enumerate(self.entries) if e["name"] == ends[0])))
        return ModelSpec.from_dict({"name": config.get("name") or Path(self.source).stem,
                                    "input_shape": list(self.input_shape or ()), "loss": self.loss,
                                    "description": "imported from a Keras model", "layers": self.entries}
                                   | ({"outputs": ends} if len(ends) > 1 else {}))

    @contextmanager
    def _blamed(self, name: str, layer: dict) -> Iterator[None]:
        """An error inside becomes one line naming the file, the layer and its class."""
        try:
            yield
        except _Refused as exc:
            raise SpecError(f"{self.source}: layer {name!r} ({layer.get('class_name')}) {exc}") from exc
        except SpecError as exc:
            raise SpecError(f"{self.source}: layer {name!r} ({layer.get('class_name')}): {exc}") from exc

    def _nodes(self, layers: list[dict], sequential: bool, prefix: str = "",
               entry: str = MODEL_INPUT) -> list[tuple[str, dict, list[str]]]:
        """Each Keras layer with its name and the names it reads; who reads whom is known before any is mapped,
        so a ZeroPadding2D knows whether its reader can take it in. A nested model's layers come in its place,
        named `prefix` + their name and reading from `entry` (what the model reads) on."""
        if not isinstance(layers, list):
            raise SpecError(f"the {f'model {prefix[:-1]!r}' if prefix else 'model'}'s layers {layers!r} are not a list")
        nodes, previous = [], entry
        for index, layer in enumerate(layers):
            name = prefix + _layer_name(layer, index, prefix)
            if name in self.seen:
                raise SpecError(f"two layers are named {name!r}; Keras names each once")
            self.seen.add(name)
            with self._blamed(name, layer):
                sources = [previous] if sequential else [self.flattened.get(prefix + source, prefix + source)
                                                         for source in _inbound(layer)]
                if layer.get("config", {}).get("trainable") is False:
                    raise _Refused("is frozen (trainable false): Keras counts its weights as non-trainable, where the "
                                   "spec's layers train theirs")
                if prefix and layer.get("class_name") == "InputLayer":
                    self.flattened[name] = previous = entry
                    continue
                if layer.get("class_name") in KERAS_MODELS:
                    previous = self._nested(name, layer, sources, nodes)
                    continue
            nodes.append((name, layer, sources))
            for source in sources:
                self.readers.setdefault(source, []).append(layer)
            previous = name
        return nodes

    def _nested(self, name: str, layer: dict, sources: list[str], nodes: list[tuple[str, dict, list[str]]]) -> str:
        """A model used as a layer, its layers added to `nodes` as its own; returns the node its output is."""
        if len(sources) != 1:
            raise _Refused(f"is a model reading {len(sources)} tensors; the spec's nested models read one")
        config, sequential = layer.get("config", {}), layer.get("class_name") == "Sequential"
        inner = self._nodes(config.get("layers", []), sequential, f"{name}/", sources[0])
        nodes.extend(inner)
        outputs = self._output_layers(config, inner, sequential, f"{name}/")
        if len(outputs) > 1:
            raise _Refused(f"is a model of {len(outputs)} outputs; the spec's nested models have one")
        self.flattened[name] = outputs[0] if outputs else sources[0]
        return self.flattened[name]

    def _output_layers(self, config: dict, nodes: list[tuple[str, dict, list[str]]], sequential: bool,
                       prefix: str = "") -> list[str]:
        """The nodes that are the model's outputs, in its order (a nested model's names have its `prefix`); none
        for a model of none."""
        inputs = _end_layers(config.get("input_layers"), "input")
        if len(inputs) > 1:
            raise SpecError(f"the model has {len(inputs)} inputs; a spec has one")
        outputs = _end_layers(config.get("output_layers"), "output")
        if outputs and not sequential:
            return [self.flattened.get(prefix + output, prefix + output) for output in outputs]
        return [nodes[-1][0]] if nodes else []

    def _input(self, batch_shape: object) -> None:
        if not isinstance(batch_shape, list) or len(batch_shape) < 2 or not all(isinstance(s, int)
                                                                                 for s in batch_shape[1:]):
            sized = isinstance(batch_shape, list) and None in batch_shape[1:]  # built with its image size open
            raise SpecError(f"the model's input shape {batch_shape!r} must be known"
                            + (f"; fix: {Fix.KERAS_INPUT_SHAPE}" if sized else " (no None besides the batch)"))
        shape = tuple(positive(size, "input_shape entries") for size in batch_shape[1:])  # before any layer's
        if self.input_shape not in (None, shape):
            raise SpecError(f"the model has a second input, of shape {batch_shape!r} (the first's is "
                            f"{list(self.input_shape)}); a spec has one")
        self.input_shape = shape
        self.shapes[MODEL_INPUT] = self.input_shape

    def _loss(self, compile_config: dict, nodes: list[tuple[str, dict, list[str]]]) -> str:
        layers = {name: layer for name, layer, _ in nodes}
        softmax = [_activation_name(layers[output].get("config", {}).get("activation")) == "softmax"
                   for output in self.outputs]
        return shared_loss(compile_config, self.outputs, softmax)

    def _emit(self, name: str, kind: str, inputs: list[str], **options: object) -> str:
        """Adds one spec layer, checking its options, inputs and shapes now so an error names this layer."""
        layer = LAYER_TYPES[kind](**options)
        least, most = layer.arity
        if not least <= len(inputs) <= (most or len(inputs)):
            raise _Refused(f"reads {len(inputs)} tensors; the spec's {kind} reads "
                           f"{'one' if most == 1 else f'at least {least}'}")
        shape = layer.output_shape(*(self.shapes[s] for s in inputs))
        if name in self.shapes:  # a Keras layer named as the model's input: the suffix keeps its Keras name readable
            name += "/"
        self.entries.append({"type": kind, "name": name, "inputs": inputs, **options})
        self.shapes[name] = shape
        self.kinds[name] = kind
        return name

    def _activation(self, name: str, value: object) -> str | None:
        """The spec layer an activation becomes; None for the identity (and the output's softmax, which
        cross-entropy applies itself)."""
        activation = _activation_name(value)
        if activation == "softmax" and name in self.outputs and self.loss == "cross_entropy":
            return None
        if not isinstance(activation, str) or activation not in ACTIVATIONS:
            raise _Refused(f"uses activation {activation!r}, which has no counterpart in the spec (relu, relu6, silu, "
                           f"sigmoid, hard_sigmoid, hard_silu, gelu, leaky_relu, elu, softplus, mish, linear do, and "
                           f"softmax on a classifier's output)")
        if activation == "hard_sigmoid" and self.keras_version.startswith("2."):
            raise _Refused(f"uses Keras {self.keras_version}'s hard_sigmoid, max(0, min(1, 0.2 x + 0.5)); the spec's "
                           f"is Keras 3's, relu6(x + 3) / 6")
        return ACTIVATIONS[activation]

    def _layer(self, name: str, layer: dict, sources: list[str]) -> None:
        kind, config = layer["class_name"], layer.get("config", {})
        unknown = [source for source in sources if source not in self.alias]
        if unknown or not sources:
            raise _Refused(f"reads {unknown[0]!r}, which no layer before it computes (none is named so, or it reads "
                           f"this one)" if unknown else "reads no tensor")
        if config.get("data_format", "channels_last") != "channels_last":
            raise _Refused("is channels-first; the spec is channels-last")
        owed = self.padding.get(sources[0]) if len(sources) == 1 else None
        inputs = [self.alias.get(s, s) for s in sources]
        if str(layer.get("module", "")).startswith("keras.src.ops"):
            out = self._operation(name, kind, layer, inputs)
        elif (layer.get("module"), kind) == RESIDUAL_SCALE and len(inputs) == 2:  # the branch rescaled, then added
            scaled = self._emit(f"{name}/scale", "rescale", inputs[1:], scale=_required(config, "scale"))
            out = self._emit(name, "add", [inputs[0], scaled])
        elif (layer.get("module"), kind) == LAYER_SCALE:
            if config.get("projection_dim") != self.shapes[inputs[0]][-1]:
                raise _Refused(f"scales {config.get('projection_dim')!r} values per position of a tensor of shape "
                               f"{self.shapes[inputs[0]]}; the spec's layerscale scales each channel")
            out = self._emit(name, "layerscale", inputs)
        else:
            out = self._mapped(name, kind, config, inputs, owed)
        if config.get("activation") is not None:
            follow = self._activation(name, config["activation"])
            if follow:
                out = self._emit(name if kind == "Activation" else f"{name}/{follow}", follow, [out],
                                 **ACTIVATION_DEFAULTS.get(follow, {}))
        self.alias[name] = out

    def _operation(self, name: str, kind: str, layer: dict, inputs: list[str]) -> str:
        """A keras.ops call on one tensor and one number (OPERATIONS) as the spec's rescale, or on two tensors
        (JOINS) as its add or multiply."""
        node = (layer.get("inbound_nodes") or [{}])[0]
        args = node.get("args", []) if isinstance(node, dict) else []
        numbers = [arg for arg in (args if isinstance(args, list) else [])
                   if isinstance(arg, (int, float)) and not isinstance(arg, bool)]
        if kind in JOINS and len(inputs) == 2 and not numbers:
            return self._emit(name, JOINS[kind], inputs)
        if kind not in OPERATIONS or len(inputs) != 1 or len(numbers) != 1:
            raise _Refused(f"is keras.ops' {kind} of {len(inputs)} tensors and {len(numbers)} numbers; the spec has a "
                           f"tensor plus or times a number (a rescale), and the sum or product of two tensors")
        return self._emit(name, "rescale", inputs, **{OPERATIONS[kind]: numbers[0]})

    def _norm_over_channels(self, config: dict, source: str, layer: str, option: str, doing: str,
                            learned: tuple[str, ...] = ("center", "scale")) -> None:
        """Batch and layer norm: the spec's normalize the channel (last) axis, with the `learned` of scale and offset
        that Keras learns, and without `option` (batch norm's renorm, layer norm's RMS scaling)."""
        if not self._last_axis(config.get("axis", -1), source):
            raise _Refused(f"normalizes axis {config.get('axis')!r}; the spec's {layer} is over the channel (last) "
                           f"axis")
        for name in learned:
            flag(config.get(name, True), name)
        flag(config.get(option, False), option)
        if not all(config.get(name, True) for name in learned) or config.get(option):
            raise _Refused(f"drops its scale or offset, or {doing}; the spec's {layer} has both and does not")

    def _last_axis(self, axis: object, source: str) -> bool:
        """Whether a Keras `axis` (an int or a list of one) is the channel axis, the last."""
        axis = axis[0] if isinstance(axis, list) and len(axis) == 1 else axis
        return axis in (-1, len(self.shapes[source]))

    def _takes_padding(self, reader: dict, pixels: int, source: str) -> bool:
        """Whether the one reader of a symmetric ZeroPadding2D computes the same with the pixels as its own padding:
        a valid conv or average pool (whose padding is zeros), or a valid max pool (whose padding is minus infinity)
        of an input that is never negative."""
        kind, config = reader.get("class_name"), reader.get("config", {})
        if config.get("padding", "valid") != "valid" or config.get("data_format", "channels_last") != "channels_last":
            return False
        if kind in CONVS:
            return True
        sizes = _pair(config.get("pool_size", 2))  # sizes that are none are the pool's own to refuse, not read here
        # the spec's pools pad at most half a window
        fits = bool(sizes) and all(isinstance(size, int) for size in sizes) and pixels <= min(sizes) // 2
        return fits and (kind == "AveragePooling2D" or kind == "MaxPooling2D" and self.kinds.get(source) in NONNEGATIVE)

    def _same_pool_padding(self, source: str, pool: int, stride: int) -> tuple[int, bool]:
        """A pool's 'same' as pixels per side and ceil_mode: Keras leaves the padding out of the max and out of the
        mean, and so does the spec (a max pool's padding is minus infinity; an average pool's is left out); the odd
        pixel after (TensorFlow's rule) is the leading pixels plus ceil_mode, whose last window's overhang is the
        trailing pixel, left out alike."""
        shape = self.shapes[source]
        if len(shape) != 3:
            raise _Refused(f"needs an image input (H, W, C), got shape {shape}")
        (before, after), *others = {same_padding(shape[0], pool, stride), same_padding(shape[1], pool, stride)}
        if others:
            raise _Refused("pads height and width differently ('same' on a non-square map); the spec's pools pad "
                           "both alike")
        if after == before:
            return before, False
        overhang = MaxPool2D(pool=pool, stride=stride, padding=before, ceil_mode=True).overhang(shape)
        if overhang != (after - before, after - before):
            raise _Refused(f"pads 'same' unevenly ({before} before, {after} after); the spec's pools take at most "
                           f"one more pixel after than before")
        return before, True

    def _mapped(self, name: str, kind: str, config: dict, inputs: list[str], owed: int | None) -> str:
        """The spec layers for one Keras layer; returns the spec name of its output."""
        if kind == "ZeroPadding2D":
            return self._zero_padding(name, config, inputs)
        if kind in CONVS:
            return self._conv(name, kind, config, inputs, owed)
        if kind in ("MaxPooling2D", "AveragePooling2D"):
            return self._pool(name, kind, config, inputs, owed)
        if kind in ("BatchNormalization", "LayerNormalization", "Normalization"):
            return self._normalization(name, kind, config, inputs)
        if kind == "GroupNormalization":
            return self._group_norm(name, config, inputs)
        if kind == "Conv2DTranspose":
            return self._conv_transpose(name, config, inputs)
        if kind == "Resizing":
            return self._resizing(name, config, inputs)
        if kind == "PReLU":
            return self._prelu(name, config, inputs)
        if kind == "Dense":
            units, bias = _required(config, "units"), config.get("use_bias", True)
            if len(self.shapes[inputs[0]]) == 3:  # on each pixel's channels: a 1x1 conv's weights and arithmetic
                return self._emit(name, "conv2d", inputs, filters=units, kernel=1, padding="valid", bias=bias)
            return self._emit(name, "dense", inputs, units=units, bias=bias)
        if kind == "ReLU":
            top, slope = config.get("max_value"), config.get("negative_slope")
            if config.get("threshold") or top not in (None, 6) or slope and top is not None:
                raise _Refused("is a thresholded or capped ReLU other than ReLU6; the spec has relu, relu6 and "
                               "leaky_relu")
            if slope:
                return self._emit(name, "leaky_relu", inputs, negative_slope=slope)
            return self._emit(name, "relu6" if top == 6 else "relu", inputs)
        if kind == "LeakyReLU":  # Keras 2 named its slope alpha
            return self._emit(name, "leaky_relu", inputs, negative_slope=config.get("negative_slope",
                                                                                      config.get("alpha", 0.3)))
        if kind == "ELU":
            return self._emit(name, "elu", inputs, alpha=config.get("alpha", 1.0))
        if kind == "Activation":
            return inputs[0]  # its activation follows, as any layer's
        if kind in ("Rescaling", "UpSampling2D", "Cropping2D", "Reshape", "GlobalAveragePooling2D",
                    "AdaptiveAveragePooling2D", "Dropout"):
            return self._reshaped(name, kind, config, inputs)
        if kind in ("Flatten", "Add", "Multiply", "Concatenate"):
            return self._joined(name, kind, config, inputs)
        raise _Refused("has no counterpart in the spec (docs/models.md lists the Keras layers the importer maps)")

    def _zero_padding(self, name: str, config: dict, inputs: list[str]) -> str:
        """A ZeroPadding2D: owed to its sole reader where that layer can pad alike on every side, else zeropad2d."""
        top, bottom, left, right = _pads(_required(config, "padding"), "padding")
        readers = self.readers.get(name, [])
        if len({top, bottom, left, right}) == 1 and len(readers) == 1 \
                and self._takes_padding(readers[0], top, inputs[0]):
            self.padding[name] = top
            return inputs[0]
        return self._emit(name, "zeropad2d", inputs, top=top, bottom=bottom, left=left, right=right)

    def _pool(self, name: str, kind: str, config: dict, inputs: list[str], owed: int | None) -> str:
        """A max or average pool, with the padding it was owed or its 'same' padding."""
        pool = _square(_required(config, "pool_size"), "pool_size")
        strides = config.get("strides")  # None: the pool's size, Keras's default
        stride = _square(pool if strides is None else strides, "strides")
        same = _padding(config) == "same"
        padding, ceil_mode = self._same_pool_padding(inputs[0], pool, stride) if same else (owed or 0, False)
        if kind == "MaxPooling2D":
            return self._emit(name, "maxpool2d", inputs, pool=pool, stride=stride, padding=padding,
                              ceil_mode=ceil_mode)
        left_out = {"count_include_pad": False} if same and (padding or ceil_mode) else {}  # a ZeroPadding2D's count
        return self._emit(name, "avgpool2d", inputs, pool=pool, stride=stride, padding=padding, ceil_mode=ceil_mode,
                          **left_out)

    def _normalization(self, name: str, kind: str, config: dict, inputs: list[str]) -> str:
        """Batch norm, layer norm or a Normalization layer, each only over the channel (last) axis."""
        if kind == "BatchNormalization":
            self._norm_over_channels(config, inputs[0], "batch norm", "renorm", "renormalizes", learned=())
            return self._emit(name, "batchnorm", inputs, epsilon=config.get("epsilon", 1e-3),
                              momentum=round(1 - number(config.get("momentum", 0.99), "momentum"), 12),
                              scale=config.get("scale", True), center=config.get("center", True))
        if kind == "LayerNormalization":
            self._norm_over_channels(config, inputs[0], "layernorm", "rms_scaling", "scales by the RMS")
            return self._emit(name, "layernorm", inputs, epsilon=config.get("epsilon", 1e-3))
        if not self._last_axis(config.get("axis", -1), inputs[0]) or config.get("invert"):
            raise _Refused(f"normalizes axis {config.get('axis')!r} or inverts; the spec's normalize is over the "
                           f"channel (last) axis and does not invert")
        mean, variance = config.get("mean"), config.get("variance")
        if mean is None and variance is None:
            return self._emit(name, "normalize", inputs)
        channels = self.shapes[inputs[0]][-1]
        constants = [[value] * channels if isinstance(value, (int, float)) else value for value in (mean, variance)]
        if not all(isinstance(value, list) and len(value) == channels for value in constants):
            raise _Refused(f"holds a mean {mean!r} and variance {variance!r} that are not one number or one per "
                           f"channel ({channels}); the spec's normalize holds one per channel")
        return self._emit(name, "normalize", inputs, mean=constants[0], variance=constants[1])

    def _group_norm(self, name: str, config: dict, inputs: list[str]) -> str:
        """GroupNormalization over the channel (last) axis: the spec's groupnorm, or its instancenorm at one channel
        a group (groups -1, or as many as the channels), learning both its scale and offset or neither."""
        if not self._last_axis(config.get("axis", -1), inputs[0]):
            raise _Refused(f"normalizes axis {config.get('axis')!r}; the spec's group norm is over the channel (last) "
                           f"axis")
        flag(config.get("center", True), "center")
        flag(config.get("scale", True), "scale")
        if config.get("center", True) != config.get("scale", True):
            raise _Refused("learns a scale or an offset but not both; the spec's group norm learns both or neither")
        groups, channels = config.get("groups", 32), self.shapes[inputs[0]][-1]
        options = {"epsilon": config.get("epsilon", 1e-3), "affine": config.get("scale", True)}
        if groups in (-1, channels):
            return self._emit(name, "instancenorm", inputs, **options)
        return self._emit(name, "groupnorm", inputs, groups=groups, **options)

    def _prelu(self, name: str, config: dict, inputs: list[str]) -> str:
        """PReLU with a slope per channel (shared over every axis but the channels) or one slope (shared over
        every axis): Keras's shared_axes, counted from 1 past the batch."""
        rank = len(self.shapes[inputs[0]])
        shared = config.get("shared_axes") or []
        shared = sorted(shared) if isinstance(shared, list) else [shared]
        if shared not in (list(range(1, rank)), list(range(1, rank + 1))):
            raise _Refused(f"shares its slope over axes {shared!r}; the spec's prelu has a slope per channel (shared "
                           f"over {list(range(1, rank))}) or one (over {list(range(1, rank + 1))})")
        return self._emit(name, "prelu", inputs, shared=shared == list(range(1, rank + 1)))

    def _reshaped(self, name: str, kind: str, config: dict, inputs: list[str]) -> str:
        """The one-input layers without weights that change a tensor's values or shape: rescaling, upsampling,
        cropping, reshape, global and adaptive average pooling (Keras's windows are torch's) and dropout."""
        if kind == "Rescaling":
            scale, offset = config.get("scale", 1.0), config.get("offset", 0.0)
            if any(isinstance(value, bool) or not isinstance(value, (int, float)) for value in (scale, offset)):
                raise _Refused(f"scales by {scale!r} and offsets by {offset!r}, per channel; the spec's rescale "
                               f"takes one number for each")
            return self._emit(name, "rescale", inputs, scale=scale, offset=offset)
        if kind == "UpSampling2D":
            interpolation = config.get("interpolation", "nearest")
            if interpolation not in INTERPOLATIONS:
                raise _Refused(f"interpolates {interpolation!r}; the spec's upsample2d is nearest or bilinear")
            return self._emit(name, "upsample2d", inputs, scale=_square(config.get("size", 2), "size"),
                              interpolation=interpolation)
        if kind == "Cropping2D":
            top, bottom, left, right = _pads(_required(config, "cropping"), "cropping")
            return self._emit(name, "crop2d", inputs, top=top, bottom=bottom, left=left, right=right)
        if kind == "Reshape":
            return self._emit(name, "reshape", inputs, shape=self._target_shape(_required(config, "target_shape"),
                                                                                 inputs[0]))
        if kind == "AdaptiveAveragePooling2D":
            return self._emit(name, "adaptive_avgpool2d", inputs, size=_pair(_required(config, "output_size")))
        if kind == "GlobalAveragePooling2D":
            return self._emit(name, "global_avg_pool", inputs, keepdims=config.get("keepdims", False))
        noise, rank = config.get("noise_shape"), len(self.shapes[inputs[0]])
        if noise is not None and noise != [None] + [1] * rank:
            raise _Refused(f"draws its mask with noise_shape {noise!r}; the spec's dropout draws one per value, "
                           f"or one per example ({[None] + [1] * rank!r})")
        return self._emit(name, "dropout", inputs, rate=config.get("rate", 0.5), per_example=noise is not None)

    def _joined(self, name: str, kind: str, config: dict, inputs: list[str]) -> str:
        """Flatten and the layers that join tensors: add, multiply and concat (over the channels only)."""
        if kind == "Concatenate" and config.get("axis", -1) not in (-1, len(self.shapes[inputs[0]])):
            raise _Refused(f"joins axis {config.get('axis')!r}; the spec's concat joins channels (axis -1)")
        return self._emit(name, {"Flatten": "flatten", "Add": "add", "Multiply": "multiply",
                                 "Concatenate": "concat"}[kind], inputs)

    def _conv(self, name: str, kind: str, config: dict, inputs: list[str], owed: int | None) -> str:
        """A Conv2D, a DepthwiseConv2D (a conv2d of groups = channels), or a SeparableConv2D: that depthwise conv,
        without bias, then a 1x1 conv holding the layer's bias."""
        window = {"kernel": _pair(_required(config, "kernel_size")),  # Inception's 1x7 too
                  "stride": _square(config.get("strides", 1), "strides"),
                  "padding": _padding(config) if owed is None else owed,
                  "dilation": _square(config.get("dilation_rate", 1), "dilation_rate")}
        bias = config.get("use_bias", True)
        if kind == "Conv2D":
            return self._emit(name, "conv2d", inputs, filters=_required(config, "filters"),
                              groups=config.get("groups", 1), bias=bias, **window)
        channels = self.shapes[inputs[0]][-1]
        multiplier = positive(config.get("depth_multiplier", 1), "depth_multiplier")
        depthwise = {"filters": channels * multiplier, "groups": channels, **window}
        if kind == "DepthwiseConv2D":
            return self._emit(name, "conv2d", inputs, bias=bias, **depthwise)
        half = self._emit(f"{name}/depthwise", "conv2d", inputs, bias=False, **depthwise)
        return self._emit(f"{name}/pointwise", "conv2d", [half], filters=_required(config, "filters"), kernel=1,
                          padding="valid", bias=bias)

    def _resizing(self, name: str, config: dict, inputs: list[str]) -> str:
        """Resizing to a height and width: bilinear (half-pixel centres, TensorFlow's and JAX's, torch's
        align_corners=False) as the spec's resize2d; nearest (TensorFlow's half-pixel nearest) only by a whole
        factor, where it repeats each pixel as the spec's upsample2d does."""
        height, width = (positive(config.get(key), key) for key in ("height", "width"))
        h, w, _ = self.shapes[inputs[0]] if len(self.shapes[inputs[0]]) == 3 else (0, 0, 0)
        interpolation = config.get("interpolation", "bilinear")
        if not h or config.get("crop_to_aspect_ratio") or config.get("pad_to_aspect_ratio") or \
                config.get("antialias") or config.get("data_format") == "channels_first":
            raise _Refused("resizes other than an image's height and width plainly; the spec's resize2d stretches a "
                           "channels-last image, without antialiasing")
        if interpolation == "bilinear":
            return self._emit(name, "resize2d", inputs, size=[height, width], interpolation="bilinear")
        if interpolation == "nearest" and height % h == 0 and height // h == width // w and width % w == 0:
            return self._emit(name, "upsample2d", inputs, scale=height // h)
        raise _Refused(f"resizes {interpolation!r} from {h}x{w} to {height}x{width}; the spec has TensorFlow's "
                       f"nearest only by a whole factor, and bilinear")

    def _conv_transpose(self, name: str, config: dict, inputs: list[str]) -> str:
        """Conv2DTranspose: 'valid' cuts nothing and adds its output_padding (Keras's default max(kernel, stride)
        - kernel), torch's padding 0; 'same' is the spec's own (size x stride pixels, TensorFlow's rule)."""
        kernel, stride = _pair(_required(config, "kernel_size")), _square(config.get("strides", 1), "strides")
        if _square(config.get("dilation_rate", 1), "dilation_rate") != 1:
            raise _Refused("is dilated; the spec's conv_transpose2d is not")
        given = config.get("output_padding")
        if _padding(config) == "same":
            if given is not None:
                raise _Refused("pads 'same' and sets output_padding; the spec's 'same' is TensorFlow's, without it")
            padding: object = "same"
            extra: object = 0
        else:
            padding = 0
            extra = [max(positive(size, "kernel_size"), stride) - size for size in kernel] if given is None \
                else _pair(given)
        return self._emit(name, "conv_transpose2d", inputs, filters=_required(config, "filters"), kernel=kernel,
                          stride=stride, padding=padding, output_padding=extra, bias=config.get("use_bias", True))

    def _target_shape(self, target: list, source: str) -> list[int]:
        """Reshape's target with its one -1 worked out; only the spec's ranks, (F,) and (H, W, C)."""
        if not isinstance(target, list) or len(target) not in (1, 3):
            raise _Refused(f"reshapes to {target!r}; the spec's shapes are (F,) or (H, W, C)")
        target = list(target)
        if -1 in target:
            at = target.index(-1)
            known = math.prod(positive(size, "target_shape entries") for i, size in enumerate(target) if i != at)
            target[at] = math.prod(self.shapes[source]) // known
        return target
