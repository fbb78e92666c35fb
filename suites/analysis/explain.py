"""`python -m suites estimate`: the estimate of one scenario as a table, before anything runs."""

from __future__ import annotations

from models.estimate import CATEGORIES, RULES, Estimate
from models.scenario import DTYPES
from suites.analysis import constants

MIB = 2**20
LABELS = {
    "weights": "weights",
    "gradients": "gradients",
    "accumulated_gradients": "gradient accumulator",
    "half_weights": "half-precision weight copies",
    "optimizer_state": "optimizer state",
    "inputs": "input batch and targets",
    "saved_activations": "activations kept for backward",
    "transient": "largest transient (in flight)",
    "update_temporaries": "optimizer update temporaries",
    "init_temporaries": "initializer temporaries",
    "library_workspace": "BLAS workspaces (measured size)",
    "retained_pages": "freed earlier, still held (driver only)",
}


def _row(label: str, values: list[float | None]) -> str:
    cells = "".join(f"{'-' if value is None else f'{value / MIB:,.1f}':>14}" for value in values)
    return f"{label:<38}{cells}"


def render(analytic: Estimate, known: dict | None, source: str) -> str:
    """The categories per phase in MiB, the measured constants (labelled) and the total."""
    size = DTYPES[analytic.dtype]
    phases = [p for p in analytic.phases if p.items]
    weights = analytic.param_count * size
    hand = analytic.activation_values_per_example
    lines = [
        f"{analytic.model}: {analytic.param_count:,} parameters, {weights:,} bytes of {analytic.dtype} weights "
        f"({weights / 1e6:,.1f} MB)",
        f"scenario: {analytic.kind}, batch {analytic.batch}, {analytic.optimizer if analytic.kind == 'train' else 'no'}"
        f" optimizer, {analytic.dtype}, {analytic.device}; framework: {analytic.framework}; technique: "
        f"{analytic.technique}",
        f"hand count: {hand:,} activation values per example (the input and every layer's output, ReLU in place)"
        f" = {hand * size / 1e6:,.1f} MB per example forward",
        "",
        f"{'MiB at the peak of each phase':<38}" + "".join(f"{p.name:>14}" for p in phases),
    ]
    for category in CATEGORIES:
        if any(p.items.get(category) for p in phases):
            lines.append(_row(LABELS[category], [p.items.get(category, 0) for p in phases]))
    lines.append(_row("tensors (analytic)", [p.total for p in phases]))
    if known:
        overheads = [constants.overhead(known, p.name, "driver", analytic.layers) for p in phases]
        lines.append(_row("runtime overhead (measured constant)", overheads))
        lines.append(_row("context (measured constant)", [known["context"]] * len(phases)))
        totals = [p.total + (o or 0) + known["context"] for p, o in zip(phases, overheads, strict=True)]
        lines.append(_row("total", totals))
        peak_name, peak = max(zip((p.name for p in phases), totals, strict=True), key=lambda pair: pair[1])
        overhead = constants.overhead(known, peak_name, "driver", analytic.layers) or 0
        context = known["context"]
        lines += ["", f"total at the peak ({peak_name}): {peak / MIB:,.1f} MiB; its context ({context / MIB:,.1f} MiB)"
                  f" and runtime overhead ({overhead / MIB:,.1f} MiB) are measured constants from {source}"
                  f" (the probe model on {known.get('measured_on', 'an unrecorded machine')}, "
                  f"{', '.join(f'{k} {v}' for k, v in known.get('versions', {}).items()) or 'versions unrecorded'}; "
                  f"commit {known['git_commit']}, {known['measured_at']}"
                  + (f"; with the depth probe's cost per layer for {analytic.layers} layers"
                     if known.get("per_layer") else "; no depth probe: nothing per layer") + ")"]
    else:
        peak_name = analytic.peak.name
        lines += ["", f"total at the peak ({analytic.peak.name}): {analytic.peak.total / MIB:,.1f} MiB of tensors;",
                  "context and runtime overhead not included: " + (
                      f"no probe of {analytic.framework} ({analytic.kind}) on {analytic.device} in {source}"
                      if analytic.framework != "any" else "name a --framework to add its measured constants")]
    peak_phase = analytic.phase(peak_name)
    lines += [f"at the peak: {peak_phase.moment}",
              f"physical floor: {analytic.floor / MIB:,.1f} MiB (weights, "
              + ("optimizer state, the batch with its targets (a micro-batch's when accumulating, with the "
                 "gradients' sum) and the largest input and output of one conv, dense or pooling layer; no other "
                 "gradient or saved activation: XLA fuses each update into the backward pass and recomputation "
                 "keeps as little as it likes)" if analytic.kind == "train"
                 else "the batch and the largest input and output of one conv, dense or pooling layer)"),
              f"rules ({analytic.rules}): {RULES[analytic.rules].why}"]
    return "\n".join(lines)
