"""The margin an answer from the estimate states: how far the estimate fell short on nets it was never tuned on.

The published zoo table (results/zoo-<commit>/zoo.json) measures the estimate on the held-out half of its split
(models/zoo_split.py) per framework, on the device it ran on; the margin is the 95th percentile of those shortfalls
(`errors.margin`). `estimate --budget` grows each total by it, and `fit` states what the estimate with it would
have answered. A device the zoo has not run on has no margin, and the answer says so rather than borrow another
device's: what XLA keeps on a CPU (its compiler's heap) is not what it keeps on a GPU.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from models import backends
from suites.run.registry import ROOT

RESULTS = ROOT / "results"


@dataclass(frozen=True)
class Margin:
    """A framework's margin on a device, and the evidence it rests on."""

    framework: str
    device: str
    value: float  # the total is grown by this share
    median: float  # the held-out half's median absolute error
    pairs: int  # the held-out (net, phase) pairs it was taken from
    nets: int
    source: str  # the zoo folder, relative to the project
    sizes: str = "the zoo's size"  # the input sizes it holds at

    def __str__(self) -> str:
        return (f"+{self.value:.0%}: the 95th percentile of the estimate's shortfall on the zoo's held-out nets "
                f"({self.nets} nets, {self.pairs} phases, {self.sizes}) in {self.framework} on the {self.device}, "
                f"{self.source}/")


@cache
def published_zoo(results: Path = RESULTS) -> dict | None:
    """The newest published zoo table with an evaluation (by when it was written), or None; read once a process
    (every published estimate reads it, and a report accounts many records). Shared: read it, never change it."""
    found = []
    for path in sorted(results.glob("zoo-*/zoo.json")):
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(data, dict) and data.get("evaluation"):
            found.append((data.get("written_at", ""), str(path.parent.relative_to(results.parent)), data))
    if not found:
        return None
    _, folder, data = max(found)
    return data | {"folder": folder}


def margin(framework: str, device: str, zoo: dict | None) -> Margin | None:
    """`framework`'s margin on `device` from the zoo table `zoo` (`published_zoo`), None where it has none."""
    evaluation = (zoo or {}).get("evaluation") or {}
    held_out = ((evaluation.get("frameworks") or {}).get(framework) or {}).get("held-out")
    if evaluation.get("device") != device or not held_out or held_out.get("margin") is None:
        return None
    large = (evaluation.get("large") or {}).get("frameworks", {}).get(framework, {}).get("held-out")
    sizes = f"at the zoo's size and {evaluation['large']['size']} px" if large else "at the zoo's size"
    return Margin(framework, device, held_out["margin"], held_out["median"], held_out["n"] + (large or {}).get("n", 0),
                  held_out["nets"], zoo["folder"], sizes)


def unmeasured(framework: str, device: str, constants: str | None = None) -> str:
    """Why a framework's estimate has no margin: the zoo never trained it on the device, or the estimate runs on
    `constants` other than the published ones, which the published zoo's margin was measured with."""
    if constants:
        return (f"unmeasured with the constants of {constants} (the published zoo's margin holds for the published "
                f"constants alone)")
    return f"unmeasured on the {device} (the zoo's held-out half has not been trained in {framework} there)"


def unseen_line(framework: str, device: str, margin: Margin | None, peak: int, constants: str | None = None) -> str:
    """What the estimate's total at the peak (`peak` bytes) can be trusted to on a net it never saw, in one sentence:
    the held-out median and the total with the margin, or why it is unmeasured (`unmeasured`). For the XLA family
    it names what the spec cannot tell."""
    unknown = (" What XLA keeps beyond the kept tensors (its buffer plan's own temporaries, its compiler's heap) is "
               "not known from the spec: the margin counts it." if backends.backend(framework) in ("jax", "tensorflow")
               else "")
    if margin is None:
        return f"on nets it never saw: {unmeasured(framework, device, constants)}, so no margin.{unknown}"
    return (f"on nets it never saw (the zoo's held-out half on the {device}): median error {margin.median:.1%}; with "
            f"its margin +{margin.value:.0%} the total at the peak is {peak * (1 + margin.value) / 2**20:,.1f} MiB "
            f"({margin.source}/).{unknown}")
