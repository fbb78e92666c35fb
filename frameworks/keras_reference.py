"""A Keras model file's own answer, for `models --model-file FILE --check` (suites/run/import_check.py): Keras's
counts of the net the file describes and, for a `.keras` file (which holds weights), its output on a given batch
and its weights by layer, which the imported spec loads to compute the same thing in every framework.

Run by the worker (`keras-reference` job) in a Keras interpreter, its backend fixed by the caller. The file is read
in Keras's safe mode: a Lambda layer's code in a stranger's file is not run.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import keras
    import numpy as np


def keras_reference(model_file: str, arrays_path: str, out_path: str, scores: bool) -> None:
    """Writes `trainable` and `non_trainable` (Keras's counts), and for a `.keras` file `output` on the arrays'
    `inputs` in inference and `weights:<layer>:<i>` (`layer_weights`). `scores`: the output layer's softmax left out,
    as the spec's cross_entropy takes it in."""
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
    if scores:
        last = model.layers[-1]
        while isinstance(last, keras.Model):  # a nested model's last layer is the output layer
            last = last.layers[-1]
        last.activation = keras.activations.linear
    output = keras.ops.convert_to_numpy(model(np.load(arrays_path)["inputs"], training=False))
    np.savez(out_path, output=output, **counts, **layer_weights(model))


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
