"""Does it fit on my card? The largest batch that runs within a memory budget, found by bisection.

Every probe is a fresh worker. Where the framework can cap its own GPU memory the budget is enforced
by it (torch's per-process memory fraction, TensorFlow's logical-device memory limit, JAX's
preallocation fraction), so a batch too large fails the way it would on the smaller card. Otherwise
(on the CPU) a probe fits when it finished and its whole-process peak, the driver's view, stayed within
the budget: judged, not enforced, and the result says so. A preallocated pool counts as what the model
used of it, so a framework is not judged by a pool the cap itself sized. A probe is judged on the phases that have
a figure, and says which had none; each answer says what it was judged on (`judged_on`) and keeps every probe's
whole record, so a fit run file can be read again.

Only running out of memory, or a peak over the budget, means "does not fit". Any other failure (an
error, a crash, a timeout) leaves the answer unknown, with the reason: it says nothing about memory.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from decimal import Context, Decimal

from models import backends
from models.scenario import Scenario
from models.spec import SpecError
from models.techniques import ACCUMULATION_STEPS
from suites.analysis import figures
from suites.run import nvml

# case-sensitive, as written (5mb is refused: Mb would be megabits)
UNITS = {"B": 1, "kB": 10**3, "MB": 10**6, "GB": 10**9, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30}
PRINTED = ("MiB", "GB", "MB", "KiB", "kB", "B")  # how a budget prints: MiB first, the unit of every table
SIZE_RULE = "a positive size with a case-sensitive unit (B, kB, MB, GB: powers of 10; KiB, MiB, GiB: powers of 2)"
MAX_BUDGET = 2**63 - 1  # bytes: one bound, however the budget is written (32 digits of GiB, or 1e30GiB)
MAX_BATCH = 4096
EXIT_CODES = {"fits": 0, "does not fit": 1, "unknown": 3}  # 2 is the command line's own: bad input


def parse_budget(text: str) -> int:
    """'2GiB', '900MB', '8.2 GB', '1e3 MB' -> whole bytes, exactly (decimal arithmetic, never a float's: 8.2 GB is
    8,200,000,000 B, not 8,199,999,999), up to MAX_BUDGET whatever the notation; a one-line SpecError otherwise."""
    match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([A-Za-z]+)\s*", text)
    if not match or match.group(2) not in UNITS:  # no unit, or an unknown one (in the wrong case too)
        raise SpecError(f"budget must be {SIZE_RULE} of at least one byte, got {_shown(text)}")
    value = Decimal(match.group(1))
    # compared before it is multiplied, exactly: 1e999999999 is never worked out; digits enough for the product
    size = 0 if value > MAX_BUDGET else int(Context(prec=len(text) + 20).multiply(value, UNITS[match.group(2)]))
    if value > MAX_BUDGET or size > MAX_BUDGET:
        raise SpecError(f"budget must be at most {MAX_BUDGET:,} bytes (2**63 - 1, the most a 64-bit count of bytes "
                        f"holds), got {_shown(text)}")
    if size < 1:  # less than a byte ('0.4B')
        raise SpecError(f"budget must be {SIZE_RULE} of at least one byte, got {_shown(text)}")
    return size


def _shown(text: str) -> str:
    """A budget as given, cut where it would not fit a line."""
    return repr(text) if len(text) <= 40 else f"{text[:20]!r}... ({len(text):,} characters)"


def budget_text(count: int) -> str:
    """Bytes exactly: in MiB where they are a whole number of them (2,048 MiB), else in the largest unit they are a
    whole number of (900 MB, 512 KiB, down to 1 B): a budget prints as asked (5MB is not 5 MiB, 1B is not 0 MiB)."""
    unit = next(unit for unit in PRINTED if count % UNITS[unit] == 0)
    return f"{count // UNITS[unit]:,} {unit}"


def capped(scenario: Scenario, budget: int) -> tuple[Scenario, str]:
    """The scenario with the framework's own cap at the budget where it has one on this device, and how."""
    if scenario.device != "cuda":
        return scenario, "judged: the whole process's peak host memory against the budget (no cap on the CPU)"
    source = nvml.NvmlSource(nvml.visible_gpu_index())
    total = int(source.describe()["total_bytes"])
    source.close()
    # TensorFlow's memory_limit counts MiB
    mode = {"torch": f"fraction={budget / total:.4f}", "jax": f"fraction={budget / total:.4f}",
            "tensorflow": f"limit={budget // 2**20}"}.get(backends.backend(scenario.framework))
    if mode is None:
        return scenario, "judged: NVML's process peak against the budget (no cap known for this framework)"
    return replace(scenario, allocator=mode), f"enforced by the allocator mode {mode}, then judged on NVML's peak"


@dataclass(frozen=True)
class Probe:
    batch: int
    status: str
    peak_bytes: int | None
    fits: bool | None  # None: the probe failed for a reason that is not memory
    why: str
    phases_without_figure: tuple[str, ...] = ()  # not judged on: no driver figure (or no pool use) in them


def phase_figures(record: dict) -> dict[str, int | None]:
    """Each phase's figure of the whole process, None where it has none: the driver's peak, with a preallocated
    pool counted as what the model used of it: its need, or where the allocator cannot say for the phase alone,
    its peak so far (an upper bound)."""
    resolved, pool = record["scenario"]["device"], figures.pool_size(record)
    found: dict[str, int | None] = {}
    for measured in record.get("phases", []):
        held = figures.driver_peak(measured, resolved)[0]
        if held is not None and pool is not None and measured["name"] != "import":  # mapped in the context phase
            used = figures.pool_used(record, measured["name"])
            held = held - pool + used if used is not None else None
        found[measured["name"]] = held
    return found


def process_peak(record: dict) -> int | None:
    """The most the process held in the phases that have a figure; None where none has. A phase without one (at
    c3d4247 a 0.3 ms compile phase between two NVML samples) must not leave the probe with no answer."""
    return max((held for held in phase_figures(record).values() if held is not None), default=None)


def judged_on(record: dict) -> str:
    """What `process_peak` is for this record, in words: what an answer was judged on."""
    if record["scenario"]["device"] != "cuda":
        return "the host's peak RSS of the process (and the processes it started)"
    seen = ("NVML's peak of the whole device (the worker's PID not visible to NVML)"
            if record.get("nvml", {}).get("view", "").startswith("device") else "NVML's peak of the process")
    return seen + (", its preallocated pool counted as what the model used of it"
                   if figures.pool_size(record) is not None else "")


def judge(record: dict, budget: int) -> Probe:
    """Fits: finished with its peak within the budget. Does not fit: out of memory, or over. Else unknown."""
    batch, status = record["scenario"]["batch"], record["status"]
    peak = process_peak(record)
    missing = tuple(name for name, held in phase_figures(record).items() if held is None)
    failure = record.get("failure") or {}
    if status == "oom":
        return Probe(batch, status, peak, False, f"out of memory in {failure.get('phase')}", missing)
    if status != "ok":
        return Probe(batch, status, peak, None, f"{status} in {failure.get('phase')}: {failure.get('message')}",
                     missing)
    if peak is None:
        return Probe(batch, status, None, None, "no figure of the whole process to judge by", missing)
    verdict = "within" if peak <= budget else "over"
    unjudged = f" (no figure in {', '.join(missing)}: judged on the other phases)" if missing else ""
    return Probe(batch, status, peak, peak <= budget, f"peak {peak / 2**20:,.0f} MiB, {verdict} the budget{unjudged}",
                 missing)


def find(scenario: Scenario, budget: int, run: Callable[[Scenario], dict], max_batch: int = MAX_BATCH) -> dict:
    """Doubles the batch from 1 until a probe does not fit, then bisects: the answer passed and the next failed.

    A probe whose answer is unknown ends the search: the answer is then unknown too. `max_batch` bounds the
    search (and its compute time); an answer at the bound says so. Each probe keeps its whole record.
    """
    scenario, how = capped(scenario, budget)
    unit = ACCUMULATION_STEPS if scenario.technique == "accumulate" else 1  # micro-batches need a multiple
    probes: dict[int, Probe] = {}
    records: dict[int, dict] = {}

    def probe(multiple: int) -> bool | None:
        batch = multiple * unit
        records[batch] = run(replace(scenario, batch=batch))
        probes[batch] = judge(records[batch], budget)
        return probes[batch].fits

    passed, failed, unknown = 0, None, None
    multiple = 1
    while multiple * unit <= max_batch:
        fits = probe(multiple)
        if fits is None:
            unknown = probes[multiple * unit]
            break
        if not fits:
            failed = multiple
            break
        passed, multiple = multiple, multiple * 2
    while unknown is None and failed is not None and passed and failed - passed > 1:
        middle = (passed + failed) // 2
        fits = probe(middle)
        if fits is None:
            unknown = probes[middle * unit]
        else:
            passed, failed = (middle, failed) if fits else (passed, middle)
    passed, failed = passed * unit, failed * unit if failed is not None else None
    answer = "unknown" if unknown else "fits" if passed else "does not fit"
    return {"scenario": scenario.to_dict(), "budget_bytes": budget, "how": how, "answer": answer,
            "unknown_reason": f"batch {unknown.batch}: {unknown.why}" if unknown else None,
            "largest_batch": passed or None, "first_failing_batch": failed,
            "judged_on": "; ".join(dict.fromkeys(judged_on(records[b]) for b in sorted(records))) or None,
            "probes": [asdict(probes[b]) | {"record": records[b]} for b in sorted(probes)],
            "capped_at_max_batch": failed is None and not unknown}


def reread(result: dict) -> dict:
    """A result under today's rule: a result written before the rule had no `answer`, and may have counted
    a probe that failed for another reason than memory as "does not fit"."""
    probes = [p | {"fits": None} if p["status"] not in ("ok", "oom") else p for p in result["probes"]]
    unknown = next((p for p in probes if p["fits"] is None), None)
    if unknown:
        fitted = [p["batch"] for p in probes if p["fits"] and p["batch"] < unknown["batch"]]
        return result | {"probes": probes, "answer": "unknown",
                         "unknown_reason": f"batch {unknown['batch']}: {unknown['why']}",
                         "largest_batch": max(fitted, default=None), "first_failing_batch": None,
                         "capped_at_max_batch": False}
    return {"answer": "fits" if result["largest_batch"] else "does not fit", "unknown_reason": None} | result


# Where a probe's phase had not yet begun to hold the model: an out-of-memory there, in a worker whose compile helper
# ran first, is what XLA's autotuner warning read as one looked like (the H100 run at c3d4247)
BEFORE_THE_MODEL_RUNS = ("import", "context", "build", "compile")


def doubts(result: dict) -> list[str]:
    """Why an answer written before probes kept their records may be wrong: the two faults the H100 run at c3d4247
    showed, read from the probe summaries alone (a newer answer keeps each probe's record, and the faults are fixed).
    A doubt is a reason to re-run the question, not a verdict."""
    if any("record" in probe for probe in result["probes"]):
        return []
    scenario = Scenario.from_dict(result["scenario"])
    found = []
    for probe in result["probes"]:
        if probe["fits"] is None and probe["why"].startswith("no figure of the whole process"):
            found.append(f"batch {probe['batch']}: a phase had no driver sample, so the probe went unjudged "
                         "(fixed: a reading at each phase boundary)")
        elif (probe["status"] == "oom" and scenario.device == "cuda" and backends.backend(scenario.framework) == "jax"
              and probe["why"].removeprefix("out of memory in ") in BEFORE_THE_MODEL_RUNS):
            found.append(f"batch {probe['batch']}: {probe['why']}, before the model ran: likely XLA's autotuner "
                         "warning (\"not a failure\") taken for one (fixed)")
    return found


def describe(result: dict) -> str:
    """The answer with the probes that led to it."""
    scenario = Scenario.from_dict(result["scenario"])
    settings = f"{scenario.optimizer}, " if scenario.kind == "train" else ""
    head = (f"{scenario.framework} {scenario.model} {scenario.kind} ({settings}technique {scenario.technique}) "
            f"within {budget_text(result['budget_bytes'])} on {scenario.device}"
            + (f", judged on {result['judged_on']}: " if result.get("judged_on") else ": "))  # older: none
    if result.get("answer") == "unknown":
        head += f"unknown: {result['unknown_reason']}"
        if result["largest_batch"]:
            head += f" (batch {result['largest_batch']} fits)"
    elif result["largest_batch"] is None:
        head += "does not fit, not even batch 1"
    elif result["capped_at_max_batch"]:
        head += f"fits at every batch tried, up to {result['largest_batch']} (the search's bound)"
    else:
        head += f"largest batch {result['largest_batch']} (batch {result['first_failing_batch']} does not fit)"
    doubtful = doubts(result)
    if doubtful:
        head += " (doubtful: answered by code with faults since fixed)"
    lines = [head, f"budget {result['how']}", "probes (each a fresh process):"]
    verdicts = {True: "fits", False: "no  ", None: "??  "}
    lines += [f"  batch {p['batch']:>5}: {verdicts[p['fits']]}  {p['why']}" for p in result["probes"]]
    lines += [f"doubt: {reason}" for reason in doubtful]
    return "\n".join(lines)
