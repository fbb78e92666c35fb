"""A Keras model file's own answer, for `models --model-file FILE --check` (suites/run/import_check.py): Keras's
counts of the net the file describes and, for a `.keras` file (which holds weights), its output on a given batch
and its weights by layer, which the imported spec loads to compute the same thing in every framework.

Run by the worker (`keras-reference` job) in a Keras interpreter, its backend fixed by the caller. The file is read
in Keras's safe mode: a Lambda layer's code in a stranger's file is not run.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from frameworks.adapter import listed
from models.protocol import numbered

if TYPE_CHECKING:
    import keras
    import numpy as np


def keras_reference(model_file: str, arrays_path: str, out_path: str, scores: bool) -> None:
    """Writes `trainable` and `non_trainable` (Keras's counts), and for a `.keras` file `output<i>` (each output)
    on the arrays' `inputs` in inference, `float64_output<i>` (the same net and weights computed in float64: how far
    float32 rounding alone moves Keras's own answer) and `weights:<layer>:<i>` (`layer_weights`). `scores`: each
    output layer's softmax left out, as the spec's cross_entropy takes it in."""
    import keras
    import numpy as np

    path = Path(model_file)
    if path.suffix == ".keras":
        model = keras.saving.load_model(path, compile=False, safe_mode=True)
    else:  # to_json()'s JSON: the net without weights, deserialized in safe mode (its default)
        model = keras.models.model_from_json(path.read_text())
    counts = {"trainable": sum(int(np.prod(w.shape)) for w in model.trainable_weights),
              "non_trainable": sum(int(np.prod(w.shape)) for w in model.non_trainable_weights)}
    if path.suffix != ".keras":
        np.savez(out_path, **counts)
        return
    inputs = np.load(arrays_path)["inputs"]
    wide = in_float64(model)
    for net in (model, wide) if scores else ():
        for layer in _output_layers(net):
            layer.activation = keras.activations.linear
    outputs = _listed(model(inputs, training=False))
    wide_outputs = _listed(wide(inputs.astype(np.float64), training=False))
    np.savez(out_path, **numbered("output", outputs), **numbered("float64_output", wide_outputs), **counts,
             **layer_weights(model))


def _output_layers(model: keras.Model) -> list[keras.layers.Layer]:
    """The layers that compute the model's outputs (a nested model's own, for a model that ends in one)."""
    import keras

    found = []
    for tensor in model.outputs:
        layer = tensor._keras_history.operation  # Keras's own record of what made a functional model's tensor
        found += _output_layers(layer) if isinstance(layer, keras.Model) else [layer]
    return found


def _listed(output: object) -> list[np.ndarray]:
    """A model's output, or each of its outputs, as numpy arrays."""
    import keras

    return [keras.ops.convert_to_numpy(each) for each in listed(output)]


def in_float64(model: keras.Model) -> keras.Model:
    """The model rebuilt from its own config with every float32 dtype (policies and the input's) made float64, and
    its weights cast: the same net, computed with float64's rounding."""
    import keras
    import numpy as np

    def widened(value: object) -> object:
        if isinstance(value, dict):
            if value.get("class_name") in ("DTypePolicy", "FloatDTypePolicy") and isinstance(value.get("config"), dict):
                return value | {"config": value["config"] | {"name": "float64"}}
            return {key: "float64" if key == "dtype" and item == "float32" else widened(item)
                    for key, item in value.items()}
        return [widened(item) for item in value] if isinstance(value, list) else value

    wide = keras.saving.deserialize_keras_object(widened(keras.saving.serialize_keras_object(model)), safe_mode=True)
    wide.set_weights([weight.astype(np.float64) for weight in model.get_weights()])
    return wide


def layer_weights(model: keras.Model, prefix: str = "") -> dict[str, np.ndarray]:
    """Each layer's get_weights() as `weights:<layer>:<i>`; a nested model's layers as `weights:<model>/<layer>:<i>`,
    the names the importer (models/importers/keras_file.py) gives the layers it flattens out of it."""
    import keras

    found = {}
    for layer in model.layers:
        if isinstance(layer, keras.Model):
            found |= layer_weights(layer, f"{prefix}{layer.name}/")
        else:
            found |= {f"weights:{prefix}{layer.name}:{index}": value for index, value in enumerate(layer.get_weights())}
    return found


def rewrap(model_file: str, package: str, out_path: str) -> int:
    """A registered Keras class (a keras-hub backbone, a functional subclass) loaded by Keras, which imports its
    package itself (a Keras-team one only), and saved as the functional model it is, `keras.Model(inputs, outputs)`:
    its layers and weights, which the importer reads. Without the package: one line naming it, and exit 2."""
    import importlib.util
    import sys

    import keras
    from keras.src.models.functional import Functional

    if importlib.util.find_spec(package) is None:
        print(f"{package} is not installed beside Keras here ({sys.prefix}): `make zoo` installs it in .tox/zoo-keras",
              file=sys.stderr)
        return 2
    model = keras.saving.load_model(model_file, compile=False, safe_mode=True)
    if not isinstance(model, Functional):
        print(f"{type(model).__name__} is no functional model (a subclass whose call() is its code): nothing to "
              f"rewrap", file=sys.stderr)
        return 2
    keras.Model(model.inputs, model.outputs, name=model.name).save(out_path)
    return 0
