"""docs/stories.md: the four user stories (../SCENARIOS in the design) answered with figures from the published runs.

Every figure is read from a committed run file by this module (`python -m suites stories`), and a test checks the
committed page against it, so the text cannot drift from the files. The GPU answers come from the H100 run, the
CPU ones (host memory, which the suite labels as such) from the CPU runs.
"""

from __future__ import annotations

import functools
import textwrap
from pathlib import Path

from models.record import phase
from models.scenario import Scenario
from suites.analysis import accounting, across_records, errors, fit
from suites.analysis.figures import driver_peak, mib, need
from suites.run.registry import ROOT
from suites.run.runfile import load

RESULTS = ROOT / "results"
PAGE = ROOT / "docs" / "stories.md"
WIDTH = 118
GPU = "h100-c3d4247"
RUNS = {  # what each answer reads, relative to results/
    "gpu_default": f"{GPU}/default-cuda.json", "gpu_techniques": f"{GPU}/techniques-cuda.json",
    "gpu_fit": f"{GPU}/fit-cuda.json",
    "cpu_default": "cpu-eb50ac8/default-cpu.json", "cpu_techniques": "cpu-4bbc599/techniques-cpu.json",
    "cpu_sweeps": "cpu-4bbc599/sweeps-cpu.json", "cpu_fit": "cpu-248a74c/fit-cpu.json",
}
BREAKDOWN = ("context", "kernel_modules", "runtime", "weights", "inputs", "activations", "unsplit_chunks",
             "library_workspace", "update_temporaries", "transient", "unexplained", "allocator_cache", "pool_unused")


@functools.cache
def _read(name: str) -> dict:
    """A published run with its records accounted (read once: accounting a run takes seconds; nothing edits it)."""
    run = load(RESULTS / RUNS[name])
    run["records"] = accounting.reaccount(run)
    return run


def _link(name: str) -> str:
    return f"[results/{RUNS[name]}](../results/{RUNS[name]})"


def _records(run: dict, model: str, kind: str, technique: str = "none") -> list[dict]:
    return [record for record in run["records"] if record["status"] == "ok" and
            (record["scenario"]["model"], record["scenario"]["kind"], record["scenario"].get("technique", "none"))
            == (model, kind, technique)]


def _setting(record: dict) -> str:
    return Scenario.from_dict(record["scenario"]).variant


def story_1() -> list[str]:
    """Where a tiny-weight net's inference memory goes: each measured part, per framework."""
    run = _read("gpu_default")
    records = _records(run, "heatmap68", "infer")
    parts = [part for part in BREAKDOWN if any(record["breakdown"]["inference"].get(part, {}).get("bytes")
                                               for record in records)]
    lines = ["## 1. \"A 1.5 MB network runs out of memory on a 900 MB GPU\"", "",
             f"heatmap68 (1.5 MB of weights, one 256x256 image), inference on the {run['device_description']} "
             f"({_link('gpu_default')}). MiB at the inference phase's peak; each part measured or derived from "
             "measurements as the report explains (context: the CUDA context alone; kernel_modules: what the "
             "driver counts beyond the context and the allocator's pool, CUDA modules and library handles; "
             "unexplained: what the model used beyond its tensors and activations that no rule names; a pool: the "
             "preallocated memory the model did not use).", "",
             "| framework | " + " | ".join(parts) + " | the card lost |", "|---" * (len(parts) + 2) + "|"]
    for record in records:
        found = record["breakdown"]["inference"]
        held = driver_peak(phase(record, "inference"), "cuda")[0]
        lines.append(f"| {_setting(record)} | " + " | ".join(mib(found.get(part, {}).get("bytes")) for part in parts)
                     + f" | {mib(held)} |")
    weights = max(record["breakdown"]["inference"]["weights"]["bytes"] for record in records)
    context = min(record["breakdown"]["inference"]["context"]["bytes"] for record in records)
    lines += ["", f"The weights are {mib(weights)} MiB; the CUDA context alone is at least {mib(context)} MiB."]
    tracked = [saving for saving in across_records.savings(_read("cpu_techniques"))
               if saving.technique == "tracked" and saving.measured is not None]
    if tracked:
        lines += ["", f"What keeping autograd on costs in inference (plain-16, CPU host memory, "
                      f"{_link('cpu_techniques')}; negative: it held more):", "",
                  "| framework | saved MiB at the peak | share | time vs. no tracking |", "|---|---:|---:|---:|"]
        lines += [f"| {s.framework} | {mib(s.measured)} | {s.measured_share:+.0%} | {s.time_ratio:.2f}x |"
                  for s in tracked]
    return lines


def _savings_table(name: str) -> list[str]:
    run = _read(name)
    found = [saving for saving in across_records.savings(run) if saving.kind == "train"]
    frameworks = list(dict.fromkeys(saving.framework for saving in found))
    lines = [f"{run['device_description']} ({_link(name)}); each cell: MiB saved at the peak (share of the "
             "baseline's), time per step against the baseline; '-': the framework does not have it.", "",
             "| model, technique | " + " | ".join(frameworks) + " |", "|---" * (len(frameworks) + 1) + "|"]
    for model, technique in dict.fromkeys((saving.model, saving.technique) for saving in found):
        cells = []
        for framework in frameworks:
            saving = next((s for s in found if (s.framework, s.model, s.technique) == (framework, model, technique)),
                          None)
            cells.append("-" if saving is None or saving.measured is None else
                         f"{mib(saving.measured)} ({saving.measured_share:+.0%}), {saving.time_ratio:.2f}x")
        lines.append(f"| {model}, {technique} | " + " | ".join(cells) + " |")
    return lines


def story_2() -> list[str]:
    return ["## 2. \"Which tricks actually save memory?\"", "",
            "Each technique against the same model's baseline in the same framework.", "",
            *_savings_table("gpu_techniques"), "", *_savings_table("cpu_techniques")]


def story_3() -> list[str]:
    """keras200m per phase per framework, the batch sweep's steps, and "does it fit on 2 GB?"."""
    run = _read("gpu_default")
    names = ("build", "compile", "train_step_1", "train_step_2")
    lines = ["## 3. \"Keras allocates far more than my 206 M-parameter model needs\"", "",
             f"keras200m (206,538,153 parameters, 826 MB of fp32 weights), Adam, batch 1, on the "
             f"{run['device_description']} ({_link('gpu_default')}). MiB per phase as *what the card lost / what the "
             "model needed* (the allocator's peak; a preallocated pool fills the first figure).", "",
             "| framework | " + " | ".join(names) + " |", "|---" * (len(names) + 1) + "|"]
    for record in _records(run, "keras200m", "train"):
        cells = [f"{mib(driver_peak(phase(record, name), 'cuda')[0])} / {mib(need(record, name)[0])}"
                 if phase(record, name) else "-" for name in names]
        lines.append(f"| {_setting(record)} | " + " | ".join(cells) + " |")
    fits = [fit.reread(result) for result in load(RESULTS / RUNS["gpu_fit"]).get("fits", [])] + \
        [fit.reread(result) for result in load(RESULTS / RUNS["cpu_fit"]).get("fits", [])]
    lines += ["", f"Does it fit on a 2 GB card? ({_link('gpu_fit')}, {_link('cpu_fit')}):", ""]
    lines += [line for result in fits if result["scenario"]["model"] == "keras200m"
              for line in [f"- {fit.describe(result).splitlines()[0]}", *(f"  - {why}" for why in fit.doubts(result))]]
    sweeps = across_records.sweep_fits(_read("cpu_sweeps"), "batch")
    lines += ["", f"What grows with the batch (CPU host memory, {_link('cpu_sweeps')}, plot "
                  f"[sweeps-cpu.png](../results/{RUNS['cpu_sweeps'].replace('.json', '.png')})):", ""]
    for found in sweeps:
        if found.technique != "none":
            continue
        shape = ("a straight line" if found.linear else "steps: " + ", ".join(
            f"{before}->{after} +{mib(size)} MiB" for before, after, size in found.steps))
        lines.append(f"- {found.framework}, {found.model} ({found.view}): {mib(round(found.slope))} MiB per "
                     f"sample, {shape}")
    return lines


def story_4() -> list[str]:
    names = [RUNS["gpu_default"], RUNS["gpu_techniques"], RUNS["cpu_default"], RUNS["cpu_techniques"]]
    return ["## 4. \"How do I estimate my model's GPU memory before I run it?\"", "",
            "`python -m suites estimate --model resnet50 --framework torch --device cuda` gives each phase's bytes "
            "by category from the spec alone, with the card's measured constants (the published probes' "
            "constants, named in its output). Its error on the published runs, each read with today's rules and "
            "its own probes' constants (`python -m suites errors`; median and worst absolute error per framework "
            "and view):", "",
            errors.table([(f"results/{name}", load(RESULTS / name)) for name in names])]


def markdown() -> str:
    sections = [story_1(), story_2(), story_3(), story_4()]
    head = ["# The four stories, answered from the published runs", "",
            "Generated by `python -m suites stories` from the committed run files; a test fails where this page "
            "and the files disagree. The stories themselves: the README.", ""]
    lines = [*head, *(line for section in sections for line in [*section, ""])]
    return "\n".join(wrapped for line in lines for wrapped in _wrap(line)).rstrip() + "\n"


def _wrap(line: str) -> list[str]:
    """A prose or list line as lines a person reads (a table row stays whole: Markdown needs it on one line)."""
    if line.startswith("|") or len(line) <= WIDTH:
        return [line]
    bullet = len(line) - len(line.lstrip(" -")) if line.lstrip().startswith("- ") else 0
    return textwrap.wrap(line, WIDTH, subsequent_indent=" " * bullet, break_long_words=False, break_on_hyphens=False)


def write(path: Path = PAGE) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(markdown())
    return path
