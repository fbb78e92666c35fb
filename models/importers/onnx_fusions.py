"""Whether an exporter folded a batch norm into the layer before it: such a file is an inference graph, not the
user's training net, and is refused rather than measured as if it were.

A fused graph has neither the batch norm's weights nor its statistics, and its convs' weights are the exporter's
arithmetic, not the net's; a training step of it keeps none of the activations the batch norms keep (a large share
of a ResNet's). Both of PyTorch's exporters leave a trace of the fusion:
- the default (dynamo-based) exporter runs onnxscript's rewriter, which names the rule it applied in the fused
  node's metadata (`pkg.onnxscript.rewriter.rule_name`: FuseBatchNormIntoConv, ...IntoConvTranspose, ...IntoGemm);
- the legacy (TorchScript) exporter in its default TrainingMode.EVAL folds the batch norm into the conv's weight
  and bias, constants it computed and names `onnx::Conv_<n>`, where a parameter keeps its state_dict name.
Ultralytics' `model.export()` fuses them in torch itself (`model.fuse()`) before exporting, so the convs' weights
keep their names; its exporter writes its name into the model's metadata (`author`: Ultralytics; YOLOv5's writes
`stride` and `names`), and a file so marked with no norm left is its fused net. A net without norms of its own
(VGG, SqueezeNet) carries no such mark and is read as it is.
"""

from __future__ import annotations

import re

import onnx

from models.importers.fixes import Fix

RULE_KEY = "pkg.onnxscript.rewriter.rule_name"
FUSION_RULE = "FuseBatchNorm"  # the prefix of onnxscript's rules that fold a batch norm into its producer
COMPUTED_WEIGHT = re.compile(r"onnx::Conv_\d+")  # the legacy exporter's name for a conv weight it computed
NORMS = {"BatchNormalization", "InstanceNormalization", "GroupNormalization", "LayerNormalization"}


def fused_batch_norm(model: onnx.ModelProto) -> str | None:
    """Why the graph's batch norms are not there (the node that took one in, and which exporter), or None."""
    for node in model.graph.node:
        rules = next((entry.value for entry in node.metadata_props if entry.key == RULE_KEY), "")
        fused = next((rule.strip() for rule in rules.split(",") if rule.strip().startswith(FUSION_RULE)), None)
        if fused:
            return (f"node {node.name!r} ({node.op_type}) has a batch norm fused in ({fused}): an inference graph; "
                    f"fix: {Fix.KEEP_BATCH_NORMS}")
    marks = {entry.key: entry.value for entry in model.metadata_props}
    if (marks.get("author") == "Ultralytics" or {"stride", "names"} <= marks.keys()) and \
            not any(node.op_type in NORMS for node in model.graph.node):
        return f"an Ultralytics export, its batch norms fused into its convs: an inference graph; fix: " \
               f"{Fix.UNFUSED_YOLO}"
    if model.producer_name != "pytorch":
        return None
    initializers = {initializer.name for initializer in model.graph.initializer}
    for node in model.graph.node:
        if node.op_type == "Conv" and len(node.input) > 1 and node.input[1] in initializers and \
                COMPUTED_WEIGHT.fullmatch(node.input[1]):
            return (f"node {node.name!r} (Conv) reads a weight the exporter computed ({node.input[1]!r}): "
                    f"a batch norm fused in, an inference graph; fix: {Fix.KEEP_BATCH_NORMS}")
    return None
