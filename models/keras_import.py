"""Keras models as specs: a saved `.keras` file, or the JSON of `model.to_json()`, becomes a ModelSpec.

Only the model's config is read (zipfile and json, no framework), so the orchestrator can estimate and run a
user's Keras net in every framework. Each Keras layer maps to the spec layer that holds the same weights and
computes the same shapes; one that has no such counterpart is refused in one line naming the file, the layer
and its class, rather than approximated: a memory estimate of a different net would be silently wrong.

The loss comes from the file's compile config: mean squared error is `mse`, (sparse) categorical cross-entropy
is `cross_entropy`. A model saved uncompiled gets `mse`, which fits any output shape and costs what
cross-entropy costs but for one small buffer of class scores.
"""

from __future__ import annotations

import json
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

from models.spec import LAYER_TYPES, MODEL_INPUT, ModelSpec, Shape, SpecError

KERAS_MODELS = ("Sequential", "Functional", "Model")
LOSSES = {"mse": "mse", "mean_squared_error": "mse", "MeanSquaredError": "mse",
          "categorical_crossentropy": "cross_entropy", "CategoricalCrossentropy": "cross_entropy",
          "sparse_categorical_crossentropy": "cross_entropy", "SparseCategoricalCrossentropy": "cross_entropy"}
ACTIVATIONS = {"relu": "relu", "relu6": "relu6", "linear": None}  # None: the identity, no layer


class _Refused(Exception):
    """A layer with no counterpart: the message says why, the caller adds the file and the layer."""


def is_keras_config(data: object) -> bool:
    """Whether parsed JSON is a Keras model's config (what `to_json()` writes) rather than a spec."""
    return isinstance(data, dict) and data.get("class_name") in KERAS_MODELS and "config" in data


def load_keras_file(path: str | Path) -> ModelSpec:
    """A `.keras` file (a zip whose config.json describes the model); weights are not read."""
    try:
        with zipfile.ZipFile(path) as archive:
            data = json.loads(archive.read("config.json"))
    except OSError as exc:
        raise SpecError(f"cannot read Keras file {path}: {exc.strerror or exc}") from exc
    except (zipfile.BadZipFile, KeyError) as exc:
        raise SpecError(f"{path} is not a saved Keras model (a zip holding config.json)") from exc
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise SpecError(f"{path}: its config.json is not valid JSON") from exc
    if not is_keras_config(data):
        raise SpecError(f"{path}: config.json holds no Sequential or functional Keras model")
    return spec_from_keras(data, str(path))


def spec_from_keras(data: dict, source: str) -> ModelSpec:
    """The spec of a Keras model config; `source` names the file in every error."""
    try:
        return _Importer(source).spec(data)
    except SpecError as exc:
        message = str(exc)
        raise SpecError(message if message.startswith(f"{source}:") else f"{source}: {message}") from exc


def _activation_name(value: object) -> object:
    """An activation's name, whether written as a string or (Keras 3) as a serialized function."""
    return value.get("config") if isinstance(value, dict) else value


def _activation(value: object) -> str | None:
    """The spec layer an activation becomes; None for the identity."""
    name = _activation_name(value)
    if name not in ACTIVATIONS:
        raise _Refused(f"uses activation {name!r}, which has no counterpart in the spec (relu, relu6 and linear do)")
    return ACTIVATIONS[name]


def _square(value: object, what: str) -> int:
    """Keras's per-axis pair (or one int) as the spec's one size; a non-square one has no counterpart."""
    pair = [value, value] if isinstance(value, int) else list(value)
    if len(pair) != 2 or pair[0] != pair[1]:
        raise _Refused(f"{what} {value!r} is not square (the spec has one size for both axes)")
    return int(pair[0])


def _inbound(layer: dict) -> list[str]:
    """The names of the layers a functional layer reads, from Keras 3's tensors or Keras 2's node lists."""
    nodes = layer.get("inbound_nodes", [])
    if len(nodes) > 1:
        raise _Refused("the layer is called more than once (shared layers have no counterpart in the spec)")
    if not nodes:
        return []
    found: list[str] = []

    def walk(item: object) -> None:
        if isinstance(item, dict):
            history = item.get("config", {}).get("keras_history") if item.get("class_name") == "__keras_tensor__" \
                else None
            if history:
                found.append(history[0])
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
    entries: list[dict] = field(default_factory=list)
    shapes: dict[str, Shape] = field(default_factory=dict)  # each spec name's output shape, for channel counts
    alias: dict[str, str] = field(default_factory=dict)  # Keras name -> the spec name of its output
    padding: dict[str, int] = field(default_factory=dict)  # a ZeroPadding2D's pixels, owed to its one consumer
    folded: set[str] = field(default_factory=set)  # the ZeroPadding2Ds a consumer has taken in
    input_shape: Shape | None = None

    def spec(self, data: dict) -> ModelSpec:
        config = data["config"]
        layers = config.get("layers", [])
        sequential = data["class_name"] == "Sequential"
        if sequential and config.get("build_input_shape"):
            self._input(config["build_input_shape"])
        loss = self._loss(data.get("compile_config") or {})
        previous = MODEL_INPUT
        for index, layer in enumerate(layers):
            name = layer.get("config", {}).get("name") or layer.get("name") or f"layer{index}"
            try:
                sources = [previous] if sequential else _inbound(layer)
                if layer.get("class_name") == "InputLayer":
                    self._input(layer["config"].get("batch_shape") or layer["config"].get("batch_input_shape"))
                    self.alias[name] = MODEL_INPUT
                else:
                    if self.input_shape is None:
                        self._input(layer.get("config", {}).get("batch_input_shape"))
                    self._layer(name, layer, sources, loss, last=index == len(layers) - 1)
            except _Refused as exc:
                raise SpecError(f"{self.source}: layer {name!r} ({layer.get('class_name')}) {exc}") from exc
            except SpecError as exc:
                raise SpecError(f"{self.source}: layer {name!r} ({layer.get('class_name')}): {exc}") from exc
            previous = name
        self._one_input_output(config)
        for name in self.padding.keys() - self.folded:
            raise SpecError(f"{self.source}: layer {name!r} (ZeroPadding2D) is read by no conv or max pool to fold "
                            f"it into")
        return ModelSpec.from_dict({"name": config.get("name") or Path(self.source).stem,
                                    "input_shape": list(self.input_shape or ()), "loss": loss,
                                    "description": "imported from a Keras model", "layers": self.entries})

    def _input(self, batch_shape: object) -> None:
        if not isinstance(batch_shape, list) or len(batch_shape) < 2 or not all(isinstance(s, int)
                                                                                 for s in batch_shape[1:]):
            raise SpecError(f"the model's input shape {batch_shape!r} must be known (no None besides the batch)")
        self.input_shape = tuple(batch_shape[1:])
        self.shapes[MODEL_INPUT] = self.input_shape

    def _loss(self, compile_config: dict) -> str:
        loss = compile_config.get("loss")
        if loss is None:
            return "mse"
        key = loss.get("class_name") if isinstance(loss, dict) else loss
        if key not in LOSSES:
            raise SpecError(f"loss {key!r} has no counterpart in the spec (mean squared error and categorical "
                            f"cross-entropy do)")
        return LOSSES[key]

    def _one_input_output(self, config: dict) -> None:
        for key, what in (("input_layers", "input"), ("output_layers", "output")):
            ends = config.get(key)
            if ends and isinstance(ends[0], list) and len(ends) > 1:
                raise SpecError(f"the model has {len(ends)} {what}s; a spec has one")
        outputs = config.get("output_layers")
        if outputs:
            name = outputs[0][0] if isinstance(outputs[0], list) else outputs[0]
            out = self.alias.get(name, name)
            at = [i for i, entry in enumerate(self.entries) if entry["name"] == out]
            if at:
                self.entries.append(self.entries.pop(at[0]))  # the spec's output is its last layer

    def _emit(self, name: str, kind: str, inputs: list[str], **options: object) -> str:
        """Adds one spec layer, checking its shapes now so an error names this layer."""
        shape = LAYER_TYPES[kind](**options).output_shape(*(self.shapes[s] for s in inputs))
        while name in self.shapes:
            name += "_"
        self.entries.append({"type": kind, "name": name, "inputs": inputs, **options})
        self.shapes[name] = shape
        return name

    def _layer(self, name: str, layer: dict, inputs: list[str], loss: str, last: bool) -> None:
        kind, config = layer.get("class_name"), layer.get("config", {})
        if config.get("data_format", "channels_last") != "channels_last":
            raise _Refused("is channels-first; the spec is channels-last")
        padded = [source for source in inputs if source in self.padding]
        if padded and (len(inputs) > 1 or padded[0] in self.folded
                       or kind not in ("Conv2D", "DepthwiseConv2D", "MaxPooling2D")):
            raise _Refused(f"reads ZeroPadding2D {padded[0]!r}, which folds only into one conv or max pool (its sole "
                           f"reader) as that layer's padding")
        owed = self.padding[padded[0]] if padded else None
        self.folded.update(padded)
        inputs = [self.alias.get(s, s) for s in inputs]
        out = self._mapped(name, kind, config, inputs, owed)
        activation = config.get("activation")
        if activation is not None and kind not in ("Activation",):
            if last and loss == "cross_entropy" and _activation_name(activation) == "softmax":
                activation = "linear"  # the spec's cross-entropy takes scores and applies the softmax itself
            follow = _activation(activation)
            if follow:
                out = self._emit(f"{name}_{follow}", follow, [out])
        self.alias[name] = out

    def _mapped(self, name: str, kind: str, config: dict, inputs: list[str], owed: int | None) -> str:
        """The spec layers for one Keras layer; returns the spec name of its output."""
        if kind == "ZeroPadding2D":
            top_bottom, left_right = (config["padding"] if isinstance(config["padding"], list)
                                      else [[config["padding"]] * 2] * 2)
            if len({*top_bottom, *left_right}) != 1:
                raise _Refused(f"pads {config['padding']!r}, not the same on every side (the spec's padding is "
                               f"symmetric)")
            self.padding[name] = int(top_bottom[0])
            return inputs[0]
        if kind in ("Conv2D", "DepthwiseConv2D"):
            if _square(config.get("dilation_rate", 1), "dilation_rate") != 1:
                raise _Refused("is dilated; the spec's conv2d is not")
            padding: str | int = config.get("padding", "valid")
            if owed is not None:
                if padding != "valid":
                    raise _Refused("reads a ZeroPadding2D and pads 'same' itself; the spec has one padding")
                padding = owed
            common = {"kernel": _square(config["kernel_size"], "kernel_size"),
                      "stride": _square(config.get("strides", 1), "strides"), "padding": padding,
                      "bias": bool(config.get("use_bias", True))}
            if kind == "DepthwiseConv2D":
                channels = self.shapes[inputs[0]][-1]
                return self._emit(name, "conv2d", inputs, filters=channels * int(config.get("depth_multiplier", 1)),
                                  groups=channels, **common)
            return self._emit(name, "conv2d", inputs, filters=int(config["filters"]),
                              groups=int(config.get("groups", 1)), **common)
        if kind in ("MaxPooling2D", "AveragePooling2D"):
            pool = _square(config["pool_size"], "pool_size")
            stride = _square(config.get("strides") or pool, "strides")
            if config.get("padding", "valid") != "valid":
                raise _Refused("pads 'same'; the spec's pools take valid windows (or, max pool, explicit pixels)")
            if kind == "AveragePooling2D":
                return self._emit(name, "avgpool2d", inputs, pool=pool, stride=stride)
            return self._emit(name, "maxpool2d", inputs, pool=pool, stride=stride, padding=owed or 0)
        if kind == "BatchNormalization":
            axis = config.get("axis", -1)
            axis = axis[0] if isinstance(axis, list) and len(axis) == 1 else axis
            if axis not in (-1, len(self.shapes[inputs[0]])):
                raise _Refused(f"normalizes axis {axis!r}; the spec's batch norm is over the channel (last) axis")
            if not (config.get("center", True) and config.get("scale", True)) or config.get("renorm"):
                raise _Refused("drops its scale or offset, or renormalizes; the spec's batch norm has both and "
                               "does not")
            return self._emit(name, "batchnorm", inputs, epsilon=float(config.get("epsilon", 1e-3)),
                              momentum=round(1 - float(config.get("momentum", 0.99)), 12))
        if kind == "Dense":
            return self._emit(name, "dense", inputs, units=int(config["units"]),
                              bias=bool(config.get("use_bias", True)))
        if kind == "ReLU":
            top = config.get("max_value")
            if config.get("negative_slope") or config.get("threshold") or top not in (None, 6):
                raise _Refused("is a leaky, thresholded or capped ReLU other than ReLU6; the spec has relu and relu6")
            return self._emit(name, "relu6" if top == 6 else "relu", inputs)
        if kind == "Activation":
            follow = _activation(config.get("activation"))
            return self._emit(name, follow, inputs) if follow else inputs[0]
        if kind == "GlobalAveragePooling2D":
            if config.get("keepdims"):
                raise _Refused("keeps the pooled axes; the spec's global_avg_pool drops them")
            return self._emit(name, "global_avg_pool", inputs)
        if kind == "Dropout":
            return self._emit(name, "dropout", inputs, rate=float(config.get("rate", 0.5)))
        if kind == "Flatten":
            return self._emit(name, "flatten", inputs)
        if kind == "Add":
            return self._emit(name, "add", inputs)
        if kind == "Concatenate":
            if config.get("axis", -1) not in (-1, len(self.shapes[inputs[0]])):
                raise _Refused(f"joins axis {config.get('axis')!r}; the spec's concat joins channels (axis -1)")
            return self._emit(name, "concat", inputs)
        raise _Refused("has no counterpart in the spec: its layers are conv2d, depthwise conv, batch norm, dense, "
                       "pools, dropout, flatten, relu, relu6, add and concat (docs/models.md)")
