"""A Keras model's loss as the spec's: one loss the spec's outputs share, from the model's compile config or, saved
uncompiled, from its outputs (a softmax at each: a classifier's cross-entropy).
"""

from __future__ import annotations

from models.spec import SpecError

LOSSES = {"mse": "mse", "mean_squared_error": "mse", "MeanSquaredError": "mse",
          "categorical_crossentropy": "cross_entropy", "CategoricalCrossentropy": "cross_entropy",
          "sparse_categorical_crossentropy": "cross_entropy", "SparseCategoricalCrossentropy": "cross_entropy"}


def shared_loss(compile_config: object, outputs: list[str], softmax: list[bool]) -> str:
    """The spec's loss: the compile config's (one loss for every output, or one per output: a list, or a dict by
    output name), else cross_entropy where each output ends in a softmax and mse where none does; outputs that train
    with unlike losses are refused, as a spec's outputs share one."""
    if not isinstance(compile_config, dict):
        raise SpecError(f"the model's compile_config {compile_config!r} is not an object")
    loss = compile_config.get("loss")
    if loss is None:
        losses = ["cross_entropy" if each else "mse" for each in softmax]
    else:
        given = list(loss.values()) if isinstance(loss, dict) and "class_name" not in loss else \
            loss if isinstance(loss, list) else [loss]
        if not given:
            raise SpecError(f"the model's loss {loss!r} names none")
        losses = [_spec_loss(each) for each in given]
    if len(set(losses)) > 1:
        raise SpecError(f"the model's outputs {outputs} train with losses {losses}; a spec's outputs share one loss "
                        f"(cross_entropy on class scores, or mse)")
    return losses[0]


def _spec_loss(loss: object) -> str:
    """The spec's loss for one Keras loss (its name, or its serialized class)."""
    key = loss.get("class_name") if isinstance(loss, dict) else loss
    if not isinstance(key, str) or key not in LOSSES:
        raise SpecError(f"loss {key!r} has no counterpart in the spec (mean squared error and categorical "
                        f"cross-entropy do)")
    return LOSSES[key]
