"""`python -m suites estimate`: the estimate of one scenario as a table, before anything runs."""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from itertools import accumulate

from models import allocator_modes, backends, techniques
from models.estimate import CATEGORIES, RULES, Estimate, estimate, kept_by_layer
from models.scenario import DTYPES, Scenario
from models.spec import ModelSpec
from suites.analysis import constants, fit
from suites.analysis.margins import Margin, unmeasured, unseen_line

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
    "unsplit_chunks": "chunks a growing pool did not split",
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
                gpu_memory: int | None, without_pool: Estimate) -> list[str]:
    """A framework that maps a pool when the device starts, in the report headline's three figures: what it takes by
    default (the pool, sized for the card asked about, with the context beside it), what its process holds without
    the pool (the figure that compares across frameworks: `without_pool`, the estimate with the pool off, whose
    allocator maps regions as the model grows and keeps them) and what the model needs. The pool is never in the
    total: its size follows the card and the setting, not the model."""
    modes = allocator_modes.MODES[backends.backend(analytic.framework)]
    off = allocator_modes.without_pool(analytic.framework)
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
    setting = f"{off}: " + ", ".join(f"{name}={value}" for name, value in modes[off].env.items())
    grown_name, grown = peak_total(without_pool, known)
    holds = (f"{_mib(grown)} at {grown_name} ({setting}): the context and the regions its allocator maps as the "
             f"model grows, which hold the tensors above, the chunks it did not split and what it freed "
             f"(models.estimate.bfc), beside the runtime overhead; the kernel modules a step loads without the pool "
             f"are not measured yet")
    said = [f"takes by default: {takes}",
            f"holds without the pool: {holds}",
            f"needs: {_mib(peak - (known['context'] or 0))} at {peak_name}: its tensors and the runtime overhead its "
            f"allocator holds, the total less the context"]
    return [line for text in said for line in wrap(text)]


def phase_totals(analytic: Estimate, known: dict | None) -> list[tuple[str, int]]:
    """Each phase that holds anything, with the total `render` prints: its tensors plus, where `known` has them, the
    measured runtime overhead and context (a pool left out), so every answer compares the same figure."""
    phases = [p for p in analytic.phases if p.items]
    if not known:
        return [(p.name, p.total) for p in phases]
    view = "allocator" if "pool" in known else "driver"  # a pool fills a pooled probe's driver figures
    return [(p.name, p.total + (constants.overhead(known, p.name, view, analytic) or 0)
             + (known["context"] or 0)) for p in phases]


def peak_total(analytic: Estimate, known: dict | None) -> tuple[str, int]:
    """The phase with the highest total and that total: the estimate's answer to "how much does it need"."""
    return max(phase_totals(analytic, known), key=lambda pair: pair[1])


def render(analytic: Estimate, known: dict | None, source: str, gpu: str | None = None,
           gpu_memory: int | None = None, explain: bool = False, without_pool: Estimate | None = None,
           margin: Margin | None = None, other_constants: str | None = None) -> str:
    """The categories per phase in MiB, the measured constants (labelled) and the total; for a framework that maps a
    pool when the device starts, the pool on a line of its own, sized for the card `gpu` of `gpu_memory` bytes (the
    constants' card where None) and never in the total, and what the process holds without it (`without_pool`: the
    same scenario estimated with the pool off, which a pooled framework's estimate needs); with a framework, what
    the total can be trusted to on an unseen net (`margin`: the held-out half's, None where it has none or where
    `other_constants` names the constants the estimate runs on instead of the published ones). Every line
    fits a terminal (WIDTH); the rules' reasons, two thousand characters, only with `explain`, one rule a line."""
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
        overheads = [constants.overhead(known, p.name, view, analytic) for p in phases]
        lines.append(_row(f"runtime overhead ({'allocator, measured' if pooled else 'measured constant'})", overheads))
        named = "context less pool" if pooled else "context"
        lines.append(_row(f"{named} (measured constant)", [context] * len(phases)))
        lines.append(_row("total", [total for _, total in phase_totals(analytic, known)]))
        peak_name, peak = peak_total(analytic, known)
        overhead = constants.overhead(known, peak_name, view, analytic) or 0
        said = _mib(overhead) + (", its allocator's: a pool fills the probe's driver figures" if pooled else "")
        versions = ", ".join(f"{k} {v}" for k, v in known.get("versions", {}).items()) or "versions unrecorded"
        lines += ["", *wrap(f"total at the peak ({peak_name}): {peak / MIB:,.1f} MiB"
                            + (", the pool left out" if pooled else "")
                            + f"; its {named} ({'not known' if context is None else _mib(context)}) and runtime "
                            f"overhead ({said}) are measured constants from {source}"),
                  *wrap(f"(the probe model on {known.get('measured_on', 'an unrecorded machine')}, {versions}; "
                        f"commit {known['git_commit']}, {known['measured_at']}"
                        + _depth_said(analytic, known) + ")", "  ")]
        lines += _pool_lines(analytic, known, peak_name, peak, gpu, gpu_memory, without_pool) if pooled else []
        lines += wrap(unseen_line(analytic.framework, analytic.device, margin, peak, other_constants))
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


def _depth_said(analytic: Estimate, known: dict) -> str:
    """Where the cost that grows with depth comes from, for the net's layers."""
    if known.get("kind_costs"):
        fitted = (f", scaled as the zoo's tuned half measured ({len(known['depth']['nets'])} nets) with a cost per "
                  f"byte of its full conv kernels" if known.get("depth") else "")
        source = f" ({known['kind_costs']['source']})" if "source" in known["kind_costs"] else ""
        return (f"; with the kind probes' cost{source} of each of its {analytic.layers} layers by its kind "
                f"({analytic.distinct_layers} distinct){fitted}")
    if known.get("depth"):
        return (f"; with the costs per distinct and per repeating layer the zoo's tuned half measured "
                f"({len(known['depth']['nets'])} nets), for {analytic.distinct_layers} distinct of {analytic.layers} "
                f"layers")
    if known.get("per_layer"):
        return f"; with the depth probe's cost per layer for {analytic.layers} layers"
    return "; no depth probe: nothing per layer"


def largest_within(total: Callable[[int], int], budget: int, bound: int, unit: int = 1) -> tuple[int, int | None]:
    """The largest batch, a multiple of `unit` up to `bound`, whose `total` is within `budget` (0: not even `unit`),
    and the first that is not (None: the bound fits). The estimate grows with the batch, so doubling then bisecting,
    as `fit` probes runs, finds it in a few dozen estimates rather than one per batch."""
    top = bound // unit
    passed, failed, multiple = 0, None, 1
    while failed is None and passed < top:
        multiple = min(multiple, top)
        if total(multiple * unit) > budget:
            failed = multiple
        else:
            passed, multiple = multiple, multiple * 2
    while failed is not None and failed - passed > 1:
        middle = (passed + failed) // 2
        passed, failed = (middle, failed) if total(middle * unit) <= budget else (passed, middle)
    return passed * unit, None if failed is None else failed * unit


@dataclass(frozen=True)
class BatchAnswer:
    """One framework's answer to "the largest batch within a budget": the estimates either side of the edge."""

    framework: str
    known: dict | None  # its measured constants, in every total
    largest: Estimate | None  # None: not even the smallest batch fits
    first_over: Estimate | None  # None: the bound fits
    growth: tuple[Estimate, Estimate]  # two batches apart by one step: what grows per example between them
    margin: Margin | None = None  # each total grown by it before it is held against the budget


def batch_answer(framework: str, known: dict | None, at: Callable[[int], Estimate], budget: int, bound: int,
                 unit: int, margin: Margin | None = None) -> BatchAnswer:
    """The largest batch whose estimate (`at`, with `known`'s constants: `peak_total`), grown by `margin`, fits
    within `budget`."""
    at = cache(at)  # the edge's batches are estimated again for the answer
    grown = 1 + (margin.value if margin else 0)
    passed, failed = largest_within(lambda batch: peak_total(at(batch), known)[1] * grown, budget, bound, unit)
    low = max(failed - unit, unit) if failed else passed - unit
    return BatchAnswer(framework, known, at(passed) if passed else None, at(failed) if failed else None,
                       (at(low), at(low + unit)), margin)


def estimate_answer(scenario: Scenario, budget: int, bound: int, margin: Margin | None) -> str:
    """What the estimate alone, grown by `margin`, answers to `fit`'s question, in one line: a measured answer beside
    the one a user without the device would have acted on."""
    known = constants.lookup(constants.load(scenario.device), scenario.framework, scenario.kind, scenario.allocator)
    unit = techniques.ACCUMULATION_STEPS if scenario.technique == "accumulate" else 1

    def at(batch: int) -> Estimate:
        return estimate(scenario.spec, scenario.kind, batch, scenario.optimizer, scenario.dtype, scenario.framework,
                        scenario.device, scenario.technique, (known or {}).get("blas_workspace", 0))

    answer = batch_answer(scenario.framework, known, at, budget, bound, unit, margin)
    found = f"largest batch {answer.largest.batch:,}" if answer.largest else "not even the smallest batch fits"
    grown = f"its margin {margin}" if margin else (f"no margin: no held-out run in it on the {scenario.device}, so its "
                                                   f"error on nets it never saw is unmeasured")
    return f"the estimate alone: {found} ({'tensors only' if not known else 'with the measured constants'}; {grown})"


def _small(count: int, examples: int) -> str:
    """Bytes per example, in MiB, or in bytes where that would show 0.00 (a tiny net's)."""
    each = count / examples
    return f"{each / MIB:,.2f} MiB" if each >= MIB / 100 else f"{each:,.0f} B"


def _grows(answer: BatchAnswer) -> str:
    """The total's growth per example (at the larger batch's peak phase), and the category that grows most."""
    low, high = answer.growth
    name, total = peak_total(high, answer.known)
    examples = high.batch - low.batch
    before, after = low.phase(name).items, high.phase(name).items
    parts = {label: after.get(key, 0) - before.get(key, 0) for key, label in LABELS.items()}
    label, most = max(parts.items(), key=lambda pair: pair[1])
    return f"{_small(total - peak_total(low, answer.known)[1], examples)}: {_small(most, examples)} {label}"


def budget_table(first: Estimate, answers: list[BatchAnswer | tuple[str, str]], budget: int, bound: int,
                 other_constants: str | None = None) -> str:
    """Per framework, the largest batch within `budget` from the estimate alone, the first that is not, and what grows
    per example; a framework that cannot run the scenario (name, reason) says why; `first` names the scenario;
    `other_constants`: the constants it runs on where not the published ones (no margin holds for them). Every
    line fits (WIDTH)."""
    rows = [("framework", "largest batch", "estimate MiB", "first over", "grows per example")]
    notes = []
    for answer in answers:
        if not isinstance(answer, BatchAnswer):
            rows.append((answer[0], "-", "-", "-", "technique unavailable"))
            notes.append(f"{answer[0]}: {answer[1]}")
            continue
        largest, over = answer.largest, answer.first_over
        rows.append((answer.framework, f"{largest.batch:,}" if largest else "none",
                     f"{peak_total(largest, answer.known)[1] / MIB:,.1f}" if largest else "-",
                     f"{over.batch:,}" if over else "-", _grows(answer)))
        if not largest:
            notes.append(f"{answer.framework}: even batch {over.batch} does not fit: its estimate is "
                         f"{peak_total(over, answer.known)[1] / MIB:,.1f} MiB")
        if not over:
            notes.append(f"{answer.framework}: batch {bound:,} fits, the largest any command takes: the search stops "
                         f"there")
    bare = [answer.framework for answer in answers if isinstance(answer, BatchAnswer) and not answer.known]
    if bare:
        notes.append(f"tensors only, no measured context or runtime overhead on this device: {', '.join(bare)}")
    notes += [f"{answer.framework}: each total grown by its margin {answer.margin}" for answer in answers
              if isinstance(answer, BatchAnswer) and answer.margin]
    unmargined = [answer.framework for answer in answers if isinstance(answer, BatchAnswer) and not answer.margin]
    if unmargined:
        names = ", ".join(unmargined)
        notes.append(f"no margin for {names}: {unmeasured(names, first.device, other_constants)}"
                     + ("" if other_constants else "; `python -m suites zoo` measures it"))
    notes.append("an estimate, not a measurement: `python -m suites fit` runs the batches and measures them")
    # the usual widths (which fit the titles), or a figure's and a gap where wider: at the largest batch an estimate of
    # hundreds of billions of MiB stays apart from its neighbours
    widths = [max(least, *(len(row[index]) + gap for row in rows[1:]))
              for index, (least, gap) in enumerate(((17, 1), (14, 2), (14, 2), (12, 2)))]

    def line(row: tuple[str, ...]) -> str:
        figures = "".join(f"{cell:>{width}}" for cell, width in zip(row[1:4], widths[1:], strict=True))
        return f"{row[0]:<{widths[0]}}{figures}  {row[4]}"

    lines = wrap(f"{first.model}: the largest {first.kind} batch within {fit.budget_text(budget)} on {first.device} "
                 f"({first.optimizer if first.kind == 'train' else 'no'} optimizer, {first.dtype}, technique "
                 f"{first.technique}), from the estimate alone: its total at the peak, as the phase table prints it")
    return "\n".join([*lines, "", *map(line, rows), "", *(text for note in notes for text in wrap(note))])


def _what_the_loss_keeps(spec: ModelSpec) -> str:
    """What the loss's figure in the layer table is: a softmax or a difference the output's size, per output (none
    where torch's mse reads an output a layer keeps already)."""
    count = len(spec.output_layers)
    return "its output's size" if count == 1 else f"its {count} outputs' sizes, one loss each"


def layer_table(spec: ModelSpec, analytic: Estimate) -> str:
    """Keras's `summary()` with memory: per layer its type, output shape, parameters and the bytes its backward keeps
    (`kept_by_layer`, at the scenario's batch, dtype and rules), with the running total, so a person sees which layers
    hold the memory. Every layer is listed; a name too long for the line (WIDTH) is cut in the middle."""
    size = DTYPES[analytic.dtype]
    micro = techniques.ACCUMULATION_STEPS if analytic.technique == "accumulate" else 1
    kept, loss = kept_by_layer(spec, RULES[analytic.rules], analytic.batch // micro, size, analytic.technique,
                               techniques.HALF_PRECISION.get(analytic.technique, size), analytic.device)
    layers = spec.walk()
    running = list(accumulate(kept))
    shapes = ["x".join(map(str, layer.output_shape)) for layer in layers]
    widths = [max(len(f"{value:,}") for value in [*column, 0]) for column in
              ([layer.param_count for layer in layers], kept, running)]
    params_w, kept_w, running_w = (max(width, len(title)) for width, title in
                                   zip(widths, ("parameters", "kept bytes", "running total"), strict=True))
    type_w = max(len("type"), *(len(layer.layer.kind) for layer in layers))
    shape_w = max(len("output shape"), *map(len, shapes))
    name_w = min(max(len("layer"), *(len(layer.name) for layer in layers)),
                 WIDTH - type_w - shape_w - params_w - kept_w - running_w - 10)

    def cut(name: str) -> str:
        head = (name_w - 3) // 2
        return name if len(name) <= name_w else f"{name[:head]}...{name[len(name) - (name_w - 3 - head):]}"

    step = ("a train step" if analytic.kind == "train" else "tracked inference" if analytic.technique == "tracked"
            else "a train step (inference keeps none of it)")
    lines = [*wrap(f"{spec.name}: {len(layers)} layers, {spec.param_count:,} parameters; what each layer's backward "
                   f"keeps in {step}, at batch {analytic.batch // micro}, {analytic.dtype}, the {analytic.rules} "
                   f"rules on {analytic.device}, technique {analytic.technique}"),
             "", f"{'layer':<{name_w}}  {'type':<{type_w}}  {'output shape':<{shape_w}}  {'parameters':>{params_w}}  "
                 f"{'kept bytes':>{kept_w}}  {'running total':>{running_w}}"]
    lines += [f"{cut(layer.name):<{name_w}}  {layer.layer.kind:<{type_w}}  {shape:<{shape_w}}  "
              f"{layer.param_count:>{params_w},}  {kept_layer:>{kept_w},}  {total:>{running_w},}"
              for layer, shape, kept_layer, total in zip(layers, shapes, kept, running, strict=True)]
    notes = [f"total: {spec.param_count:,} parameters; the layers keep {running[-1]:,} bytes "
             f"({running[-1] / MIB:,.1f} MiB) and the loss {loss:,} more ({_what_the_loss_keeps(spec)}); a tensor two "
             f"layers keep "
             f"is counted at the first, a padded copy at its layer"]
    if analytic.technique in (*techniques.RECOMPUTING, *RULES[analytic.rules].policy_keeps):
        notes.append(f"{analytic.technique} recomputes: between runs it keeps only each run's inputs, and a run's own "
                     f"share again only while its backward runs; the column is what each layer keeps then")
    return "\n".join([*lines, "", *(line for note in notes for line in wrap(note))])
