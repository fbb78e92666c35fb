"""What a net holds beyond its tensors that grows with its depth, measured on the zoo's tuned half.

A framework's runtime grows with the code it builds for a net: XLA compiles a kernel for each layer that differs
in kind, options or input shapes from those before it, and a layer that repeats one (a ResNet's identical blocks)
reuses it. On this CPU a JAX training step of 99 tiny layers that all differ held 990 MiB beyond its tensors after
compiling, the same 99 layers repeating one shape 222 MiB. So the estimate counts two costs per layer beyond the
probe's: one per distinct layer (`ModelSpec.distinct_layers`) and one per repeating layer. The depth probe's tiny
layers cost more each than a real net's do (a JAX training step: 9.2 MiB per distinct tiny layer and 1.3 per
repeating one, which overstated every deep net of the zoo), so the two costs are measured on real nets: the records
of the tuned half of the zoo's split (models/zoo_split.py), the nets the estimate may be tuned on, by least squares
with no cost below zero, above the probe's fixed cost, with a third cost each net holds once beyond that fixed cost
(`NAMES`). The held-out half then says how well they carry over.

Where the kind probes measured a framework (suites.analysis.kind_costs: what a layer costs by its kind, a batch
norm's training step on Keras on JAX sixty times a ReLU's), the two numbers fitted are instead a scale on the kind
probes' sum over the net's layers and a cost per byte of its full conv kernels (models.layer_kinds), which on JAX's
CPU holds about two bytes per kernel byte beyond the rules, by a mechanism not yet pinned down.
"""

from __future__ import annotations

import copy
import itertools

import numpy

from models import zoo_split
from suites.analysis import kind_costs


def _least_squares(points: list[tuple[tuple[float, ...], float]]) -> tuple[float, ...]:
    """The costs, none below zero, minimizing the squares of y - sum(cost * x) over `points` ((x...), y): numpy's
    least squares on each subset of the features, the best whose costs are all non-negative (the exact non-negative
    least squares, for the two or three features a rule has). In floats: a GiB's bytes squared pass int64's range."""
    columns = len(points[0][0])
    features, targets = (numpy.array([x for x, _ in points], dtype=float),
                         numpy.array([y for _, y in points], dtype=float))
    best, best_squares = (0.0,) * columns, float(numpy.sum(targets ** 2))
    for support in itertools.chain.from_iterable(itertools.combinations(range(columns), size)
                                                 for size in range(1, columns + 1)):
        solved = numpy.linalg.lstsq(features[:, support], targets, rcond=None)[0]
        if (solved < 0).any():
            continue
        costs = numpy.zeros(columns)
        costs[list(support)] = solved
        squares = float(numpy.sum((targets - features @ costs) ** 2))
        if squares < best_squares:
            best, best_squares = tuple(float(cost) for cost in costs), squares
    return best


# What the fitted numbers are called, by what they multiply: the kind probes' sum over the layers and the full conv
# kernels' bytes (scaled, so a fraction is kept); or each net once, the distinct and the repeating layers beyond the
# probe's. The kind probes measure for themselves what every probe holds alike; the one probe's fixed cost is all the
# layer rule had, and every net of the zoo's tuned half held more than it, whatever its depth (issue 66: torch's
# estimate ran 2 to 3 % low on the median of both halves, at 64 and at 224 px), so that rule fits a cost per net too.
NAMES = {"kinds": ("kind_scale", "per_kernel_byte"), "layers": ("per_net", "per_distinct", "per_repeat")}


def features(known: dict, estimate: dict, phase: str, view: str) -> tuple[str, tuple[float, ...]]:
    """Which rule a record's phase and view is fitted by, and what its costs multiply, in `NAMES`' order."""
    layers = kind_costs.beyond_probe(known.get("kind_costs"), estimate["kinds"], phase, view)
    if layers is not None:
        return "kinds", (layers, estimate["full_conv_kernel_bytes"])
    return "layers", (1, max(estimate["distinct_layers"] - known["layers"], 0),
                      estimate["layers"] - estimate["distinct_layers"])


def fit(accounted: list[dict], measured_on: str, leave_out: tuple[str, ...] = ()) -> dict:
    """Per framework and scenario kind, per phase and view, from `accounted` (records accounted with the probe's
    constants and no depth cost) of the tuned half, but the models in `leave_out` (the probes, whose constants are
    their own figures): where the kind probes measured the framework, a scale on their sum over the layers and a
    cost per byte of full conv kernels; else a cost per net and per distinct and repeating layer beyond the probe's.
    `measured_on`: the constants file whose fixed costs they were measured above."""
    points: dict[tuple[str, str, str, str, str], list[tuple[tuple[float, ...], float]]] = {}
    nets: dict[tuple[str, str], set[str]] = {}
    probe_layers: dict[tuple[str, str], int] = {}
    for record in accounted:
        scenario, estimate = record["scenario"], record.get("estimate") or {}
        known = estimate.get("constants") or {}
        if (zoo_split.half_of(zoo_split.net_of(scenario)) != zoo_split.TUNED or "phases" not in known
                or scenario["model"] in leave_out):
            continue
        for phase, views in record.get("comparison", {}).items():
            for view, figures in views.items():
                fixed = (known["phases"].get(phase) or {}).get(view)
                if fixed is None:
                    continue
                rule, multiplied = features(known, estimate, phase, view)
                key = (scenario["framework"], scenario["kind"], phase, view, rule)
                points.setdefault(key, []).append((multiplied, figures["measured"] - figures["tensors"] - fixed))
                nets.setdefault(key[:2], set()).add(zoo_split.net_of(scenario))
                probe_layers[key[:2]] = known["layers"]
    found: dict = {}
    for (framework, kind, phase, view, rule), taken in sorted(points.items()):
        if len(taken) < len(NAMES[rule]):
            continue
        costs = _least_squares(taken)
        entry = found.setdefault(framework, {}).setdefault(kind, {
            "nets": sorted(nets[(framework, kind)]), "probe_distinct": probe_layers[(framework, kind)], "phases": {}})
        entry["phases"].setdefault(phase, {})[view] = {name: round(cost, 3) if rule == "kinds" else round(cost)
                                                       for name, cost in zip(NAMES[rule], costs, strict=True)}
    return {"measured_on": measured_on, "frameworks": found}


def merged(constants: dict | None, depth: dict | None, source: str) -> dict | None:
    """`constants` (a constants file's data, read from `source`) with each framework's depth costs from `depth`
    (`fit`'s) beside its probe's, where `depth` was measured above these constants."""
    if not constants or not depth or depth.get("measured_on") != source:
        return constants
    result = copy.deepcopy(constants)
    for framework, kinds in depth["frameworks"].items():
        for kind, entry in kinds.items():
            known = result.get("frameworks", {}).get(framework, {}).get(kind)
            if known is not None:
                known["depth"] = entry
    return result
