"""`python -m suites estimate`: the estimate of one scenario as a table, before anything runs."""

from __future__ import annotations

import textwrap

from models import allocators, backends
from models.estimate import CATEGORIES, RULES, Estimate
from models.scenario import DTYPES
from suites.analysis import constants

MIB = 2**20
WIDTH = 120  # a line a person reads; longer ones wrap, indented
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


def _mib(value: int) -> str:
    return f"{value / MIB:,.1f} MiB"


def wrap(text: str, indent: str = "") -> list[str]:
    """A sentence as lines a terminal shows whole: at most WIDTH characters (a word longer than that, such as a path,
    stays whole), continuations indented."""
    return textwrap.wrap(text, WIDTH, initial_indent=indent, subsequent_indent=indent + "  ", break_long_words=False,
                         break_on_hyphens=False)


def _rules(why: str) -> list[str]:
    """A framework's rules, one a line: its reasons are one text whose rules `;` separates (a `;` inside parentheses
    belongs to its rule)."""
    found, depth, start = [], 0, 0
    for index, char in enumerate(why):
        depth += (char == "(") - (char == ")")
        if depth == 0 and why.startswith("; ", index):
            found.append(why[start:index])
            start = index + 2
    return [line for rule in [*found, why[start:]] for line in wrap(f"- {rule}", "  ")]


def _floor(analytic: Estimate) -> str:
    """The physical floor, and why it leaves out gradients and saved activations, in the terms of the framework asked
    about: the floor is every framework's, the reason what the named one does (neutral where none is)."""
    kept = "the largest input and output of one conv, dense or pooling layer"
    if analytic.kind != "train":
        return f"physical floor: {_mib(analytic.floor)} (weights, the batch and {kept})"
    batch = ("one micro-batch with its targets and the gradients' sum" if analytic.technique == "accumulate"
             else "the batch with its targets")
    streaming = "runs each update as soon as its gradient exists"
    if analytic.rules == "neutral":
        gradients = f"a framework that {streaming} holds a few"
    elif analytic.device in RULES[analytic.rules].streams_on:
        gradients = f"{analytic.framework} on {analytic.device} {streaming}: a few are live at once"
    else:
        gradients = f"{analytic.framework} keeps them all until the update; a framework that {streaming} holds a few"
    return (f"physical floor: {_mib(analytic.floor)} (weights, optimizer state, {batch} and {kept}); left out: the "
            f"other gradients ({gradients}) and the saved activations (recomputed, they need not be kept)")


def _pool_lines(analytic: Estimate, known: dict, peak_name: str, peak: int, gpu: str | None,
                gpu_memory: int | None) -> list[str]:
    """A framework that maps a pool when the device starts, in the report headline's three figures: what it takes by
    default (the pool, sized for the card asked about, with the context beside it), what its process holds without
    the pool (the total: the figure that compares across frameworks) and what the model needs. The pool is never in
    the total: its size follows the card and the setting, not the model."""
    modes = allocators.MODES[backends.backend(analytic.framework)]
    off = allocators.without_pool(analytic.framework)
    measured_card = constants.card(known)
    asked = gpu or ("a card" if gpu_memory is not None else measured_card)  # --gpu-memory alone: a card of that size
    memory = gpu_memory if gpu_memory is not None else (
        known.get("card_bytes") if constants.other_card(known, asked) is None else None)
    why = f"its default: {modes['default'].description}"
    pooling = f"a pool that {analytic.framework} maps when the device starts, whatever the model needs"
    if known["pool"] is None or not known.get("card_bytes"):  # TensorFlow's default does not say its pool's size
        takes = f"the context and {pooling} ({why}), its share of the card not measured: neither size is known"
    else:
        share = f"{known['pool'] / known['card_bytes']:.1%} of NVML's total on {measured_card}, where it was measured"
        sized = constants.pool_on(known, memory)
        takes = (f"{_mib(sized + (known['context'] or 0))}, the context and {pooling}: {_mib(sized)} ({why}; {share}, "
                 f"applied to {asked}'s {_mib(memory)}); the model's tensors live inside it" if sized is not None else
                 f"the context and {pooling} ({why}; {share}); {asked}'s memory is not known here, so neither is the "
                 f"pool's size: give --gpu-memory SIZE")
    said = [f"takes by default: {takes}",
            f"holds without the pool: {_mib(peak)} at {peak_name}, the total above ({off}: "
            + ", ".join(f"{name}={value}" for name, value in modes[off].env.items()) + ")",
            f"needs: {_mib(peak - (known['context'] or 0))} at {peak_name}: its tensors and the runtime overhead its "
            f"allocator holds, the total less the context"]
    return [line for text in said for line in wrap(text)]


def render(analytic: Estimate, known: dict | None, source: str, gpu: str | None = None,
           gpu_memory: int | None = None, explain: bool = False) -> str:
    """The categories per phase in MiB, the measured constants (labelled) and the total; for a framework that maps a
    pool when the device starts, the pool on a line of its own, sized for the card `gpu` of `gpu_memory` bytes (the
    constants' card where None) and never in the total. Every line fits a terminal (WIDTH); the rules' reasons, two
    thousand characters, only with `explain`, one rule a line."""
    size = DTYPES[analytic.dtype]
    phases = [p for p in analytic.phases if p.items]
    weights = analytic.param_count * size
    hand = analytic.activation_values_per_example
    lines = [
        *wrap(f"{analytic.model}: {analytic.param_count:,} parameters, {weights:,} bytes of {analytic.dtype} weights "
              f"({weights / 1e6:,.1f} MB)"),
        *wrap(f"scenario: {analytic.kind}, batch {analytic.batch}, "
              f"{analytic.optimizer if analytic.kind == 'train' else 'no'} optimizer, {analytic.dtype}, "
              f"{analytic.device}; framework: {analytic.framework}; technique: {analytic.technique}"),
        *wrap(f"hand count: {hand:,} activation values per example = {hand * size / 1e6:,.1f} MB per example "
              f"forward (the input and every layer's output, ReLU in place)"),
        "",
        f"{'MiB at the peak of each phase':<38}" + "".join(f"{p.name:>14}" for p in phases),
    ]
    for category in CATEGORIES:
        if any(p.items.get(category) for p in phases):
            lines.append(_row(LABELS[category], [p.items.get(category, 0) for p in phases]))
    lines.append(_row("tensors (analytic)", [p.total for p in phases]))
    if known:
        pooled, context = "pool" in known, known["context"]
        # a pool fills a pooled probe's driver figures: what its allocator held beyond its tensors is what was measured
        view = "allocator" if pooled else "driver"
        overheads = [constants.overhead(known, p.name, view, analytic.layers) for p in phases]
        lines.append(_row(f"runtime overhead ({'allocator, measured' if pooled else 'measured constant'})", overheads))
        named = "context less pool" if pooled else "context"
        lines.append(_row(f"{named} (measured constant)", [context] * len(phases)))
        totals = [p.total + (o or 0) + (context or 0) for p, o in zip(phases, overheads, strict=True)]
        lines.append(_row("total", totals))
        peak_name, peak = max(zip((p.name for p in phases), totals, strict=True), key=lambda pair: pair[1])
        overhead = constants.overhead(known, peak_name, view, analytic.layers) or 0
        said = _mib(overhead) + (", its allocator's: a pool fills the probe's driver figures" if pooled else "")
        versions = ", ".join(f"{k} {v}" for k, v in known.get("versions", {}).items()) or "versions unrecorded"
        lines += ["", *wrap(f"total at the peak ({peak_name}): {peak / MIB:,.1f} MiB"
                            + (", the pool left out" if pooled else "")
                            + f"; its {named} ({'not known' if context is None else _mib(context)}) and runtime "
                            f"overhead ({said}) are measured constants from {source}"),
                  *wrap(f"(the probe model on {known.get('measured_on', 'an unrecorded machine')}, {versions}; "
                        f"commit {known['git_commit']}, {known['measured_at']}"
                        + (f"; with the depth probe's cost per layer for {analytic.layers} layers"
                           if known.get("per_layer") else "; no depth probe: nothing per layer") + ")", "  ")]
        lines += _pool_lines(analytic, known, peak_name, peak, gpu, gpu_memory) if pooled else []
    else:
        peak_name = analytic.peak.name
        lines += ["", f"total at the peak ({analytic.peak.name}): {analytic.peak.total / MIB:,.1f} MiB of tensors;",
                  *wrap("context and runtime overhead not included: " + (
                      f"no probe of {analytic.framework} ({analytic.kind}) on {analytic.device} in {source}"
                      if analytic.framework != "any" else "name a --framework to add its measured constants"))]
    lines += [*wrap(f"at the peak: {analytic.phase(peak_name).moment}"), *wrap(_floor(analytic))]
    lines += ([f"rules ({analytic.rules}), one a line, each with its reason:", *_rules(RULES[analytic.rules].why)]
              if explain else [f"rules: {analytic.rules} (what each layer keeps, and when memory is taken); --explain "
                               f"lists them with their reasons"])
    return "\n".join(lines)
