"""What one layer of each probed kind costs a compiling framework beyond its tensors, from the kind probes.

A kind probe's bytes beyond its tensors (per phase and view, taken as the probe's constants are) are read as a sum
over its layers: per probed kind (models.layer_kinds), a cost for each distinct layer (code compiled and kept for
it) and one for each layer that repeats an earlier one, plus what every probe holds alike. The kind probes
(models.catalogue.KIND_COST_PROBES) are as many as those unknowns and determine them; numpy's least squares solves
them. A cost the probes measure below zero (a reading's noise) counts as nothing: no layer frees memory.
"""

from __future__ import annotations

import numpy as np

from models.catalogue import KIND_COST_PROBES, get_model
from models.layer_kinds import PROBED, census
from models.spec import ModelSpec

COST_KINDS = ("distinct", "repeat")


def _row(spec: ModelSpec) -> list[int]:
    counts = census(spec)
    return [1] + [counts.get(kind, [0, 0])[index] for kind in PROBED for index in range(2)]


def solve(measured: dict[str, dict]) -> dict | None:
    """Per phase and view, each probed kind's cost per distinct and per repeating layer, from `measured`: each
    kind probe's bytes beyond its tensors by phase and view; None until every kind probe is in."""
    if set(KIND_COST_PROBES) - set(measured):
        return None
    rows = np.array([_row(get_model(name)) for name in KIND_COST_PROBES], dtype=float)
    phases: dict[str, dict] = {}
    for phase, views in measured[KIND_COST_PROBES[0]].items():
        for view in views:
            found = [measured[name].get(phase, {}).get(view) for name in KIND_COST_PROBES]
            if None in found:
                continue
            costs, _, rank, _ = np.linalg.lstsq(rows, np.array(found, dtype=float), rcond=None)
            if rank < rows.shape[1]:
                continue
            pairs = iter(costs[1:])
            phases.setdefault(phase, {})[view] = {kind: {cost: max(round(next(pairs)), 0) for cost in COST_KINDS}
                                                  for kind in PROBED}
    return {"probes": list(KIND_COST_PROBES), "phases": phases}


def layer_costs(costs: dict, counts: dict[str, list[int]], phase: str, view: str) -> int | None:
    """The bytes a net's layers cost beyond their tensors by their kinds (`counts`: `layer_kinds.census`'s), at
    the kind probes' costs; None where they did not measure the phase and view."""
    found = costs.get("phases", {}).get(phase, {}).get(view)
    if found is None:
        return None
    return sum(found[kind][cost] * counts.get(kind, [0, 0])[index]
               for kind in PROBED for index, cost in enumerate(COST_KINDS))


def beyond_probe(costs: dict | None, counts: dict[str, list[int]], phase: str, view: str) -> int | None:
    """What a net's layers (`counts`) cost beyond the probe's, whose cost its constants hold; None without kind
    costs for the phase and view."""
    found = layer_costs(costs, counts, phase, view) if costs else None
    if found is None:
        return None
    return max(found - layer_costs(costs, census(get_model("probe")), phase, view), 0)
