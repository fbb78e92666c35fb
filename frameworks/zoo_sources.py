"""The zoo's nets as their users have them: `keras.applications` saved as `.keras`, torchvision's conv nets exported
to ONNX the way that keeps the training graph (suites/bench/zoo.py runs this, then imports each file).

    python -m frameworks.zoo_sources keras OUT NAME=SIZE ...        (a Keras interpreter)
    python -m frameworks.zoo_sources torchvision OUT NAME=SIZE ...  (torch with torchvision, the zoo-torch env)
    python -m frameworks.zoo_sources timm OUT NAME=SIZE ...         (the same env, with timm)

Each net is built with weights=None and its source's defaults at a SIZExSIZE RGB input; one JSON line per net on
stdout: its file and the source's own counts (parameters; statistics: Keras's non-trainable weights, torch's
floating-point buffers), or the one-line reason the source could not build or save it.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # torch is imported only where a torch source runs: Keras's interpreter has none
    import torch

EXPORT_BATCH = 2  # the sample the exporter traces; the batch axis stays symbolic


def keras_net(name: str, size: int, out: Path) -> dict:
    import keras
    import numpy as np

    model = getattr(keras.applications, name)(weights=None, input_shape=(size, size, 3))
    path = out / f"{name}.keras"
    model.save(path)
    return {"file": str(path), "parameters": sum(int(np.prod(w.shape)) for w in model.trainable_weights),
            "statistics": sum(int(np.prod(w.shape)) for w in model.non_trainable_weights)}


def _exported(net: torch.nn.Module, name: str, size: int, out: Path) -> dict:
    """torch.onnx.export's default (dynamo) exporter from train() with optimize=False: its batch norms stay
    (optimize=True would fuse them into the convs, docs/models.md), with the batch axis dynamic."""
    import torch

    net = net.train()
    path = out / f"{name}.onnx"
    torch.onnx.export(net, (torch.randn(EXPORT_BATCH, 3, size, size),), str(path), optimize=False,
                      external_data=False, input_names=["image"], dynamic_axes={"image": {0: "N"}})
    return {"file": str(path), "parameters": sum(p.numel() for p in net.parameters()),
            "statistics": sum(b.numel() for b in net.buffers() if b.is_floating_point())}


def torchvision_net(name: str, size: int, out: Path) -> dict:
    """A torchvision classifier, or one of its segmentation nets (`torchvision.models.segmentation`, without its
    auxiliary head or a backbone's weights: its dict output exports as the one output "out"). GoogLeNet's and
    Inception v3's auxiliary heads are off: in train() they make the net's output a tuple, and a spec has one
    output."""
    import torchvision.models

    if hasattr(torchvision.models.segmentation, name):
        net = getattr(torchvision.models.segmentation, name)(weights=None, weights_backbone=None, aux_loss=False)
        return _exported(net, name, size, out)
    options = {"aux_logits": False, "init_weights": False} if name in ("googlenet", "inception_v3") else {}
    return _exported(getattr(torchvision.models, name)(weights=None, **options), name, size, out)


def timm_net(name: str, size: int, out: Path) -> dict:
    """A timm net as `timm.create_model(name, pretrained=False)` makes it."""
    import timm

    return _exported(timm.create_model(name, pretrained=False), name, size, out)


def _torchvision_on_a_cpu_torch() -> None:
    """PyPI's torchvision for Linux is a CUDA build: beside the CPU torch its compiled ops do not load, and the fake
    registrations of those ops fail at import. The model definitions need neither; the registrations are skipped."""
    import types

    sys.modules.setdefault("torchvision._meta_registrations", types.ModuleType("torchvision._meta_registrations"))


SOURCES: dict[str, Callable[[str, int, Path], dict]] = {"keras": keras_net, "torchvision": torchvision_net,
                                                         "timm": timm_net}


def main(argv: list[str]) -> int:
    source, out, nets = argv[0], Path(argv[1]), [entry.split("=") for entry in argv[2:]]
    if source in ("torchvision", "timm"):  # timm imports torchvision
        _torchvision_on_a_cpu_torch()
    out.mkdir(parents=True, exist_ok=True)
    for name, size in nets:
        try:
            found = SOURCES[source](name, int(size), out)
        except Exception as error:  # noqa: BLE001 - a net its own source cannot build is a row of the table
            found = {"error": f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"[:300]}
        print(json.dumps({"name": name} | found), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
