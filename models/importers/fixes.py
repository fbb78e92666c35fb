"""The refusals that have a known fix, and the fix: what to change in the export so that the file imports, named in the
refusal's own line (`...; fix: <the fix>`). Each is at most 200 characters and points to docs/models.md, whose
"Refusals and their fixes" lists them all. The refusal's line, past the file's path, stays within 200 characters
where the node's name is short (a name is the user's). A refusal of what the spec has no counterpart for (a layer
kind, an op) names none: no export makes it a net the spec holds.
"""

from __future__ import annotations

from enum import StrEnum


class Fix(StrEnum):
    """One known fix, as the refusal's line gives it."""

    EVAL_EXPORT = "export from eval(), or with the default exporter (dynamo=True); docs/models.md"  # the legacy
    # exporter from train() with TrainingMode.PRESERVE writes each batch norm in training mode
    # an inference export fused the batch norms into the convs
    KEEP_BATCH_NORMS = "export from train() with optimize=False; docs/models.md"
    NEWER_OPSET = "convert it with onnx.version_converter, or export at opset 13 or later; docs/models.md"
    BATCH_DYNAMIC_ONLY = "export at the image size to measure, only the batch dynamic; docs/models.md"
    DATA_BESIDE = "keep the exporter's weights file (<file>.onnx.data) beside it, under its name; docs/models.md"
    KERAS_INPUT_SHAPE = "build the model with its input shape (input_shape=(224, 224, 3)); docs/models.md"
    # a registered Keras class (keras-hub's backbones) saved as itself: its config is its arguments, not its layers
    KERAS_REWRAP = "save keras.Model(model.inputs, model.outputs), or install its package (make zoo); docs/models.md"
    # Ultralytics' model.export() fuses every batch norm into its conv (model.fuse()) before exporting
    UNFUSED_YOLO = "export YOLO(...).model from train() with torch.onnx.export, not model.export(); docs/models.md"
