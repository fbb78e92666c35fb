"""What a person reads in the first hour (issue 33): `estimate` and `run` print lines a terminal shows whole, the rules
only when asked for (--explain), a floor in the terms of the framework asked about, and a phase table that says what
its estimate is and what its error is measured against."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from models.estimate import RULES
from suites.__main__ import main
from suites.analysis import accounting
from suites.analysis.figures import mib
from suites.report import readout
from tests.conftest import run_cli

ROOT = Path(__file__).resolve().parents[1]
LONGEST = 200  # a line of output a person reads, at most
ESTIMATES = [
    ("--model", "keras200m", "--framework", "torch", "--device", "cpu"),
    ("--model", "keras200m", "--framework", "jax", "--device", "cuda"),  # a pool: its three figures
    ("--model", "resnet50", "--framework", "torch", "--device", "cuda", "--gpu", "NVIDIA A100-SXM4-40GB"),  # a warning
    ("--model", "resnet50", "--framework", "keras-tensorflow", "--device", "cuda"),  # no constants
    ("--model", "resnet50", "--framework", "keras-torch", "--device", "cpu", "--technique", "accumulate"),
    ("--model", "vgg16", "--batch", "1", "--scenario", "infer", "--device", "cpu"),  # no framework
    ("--model", "densenet121", "--budget", "16GiB", "--device", "cuda"),  # every framework's largest batch
    ("--model", "densenet121", "--framework", "keras-torch", "--layers"),  # 426 layers, one a line
]


def _estimate(capsys: pytest.CaptureFixture, *args: str) -> tuple[str, str]:
    assert main(["estimate", *args]) == 0
    out = capsys.readouterr()
    return out.out, out.err


def _too_long(text: str) -> list[str]:
    return [line for line in text.splitlines() if len(line) > LONGEST]


@pytest.mark.parametrize("args", ESTIMATES, ids=lambda args: "-".join(args[1::2]))
@pytest.mark.parametrize("explain", [(), ("--explain",)], ids=["plain", "explain"])
def test_every_line_of_an_estimate_fits_a_terminal(capsys: pytest.CaptureFixture, args: tuple[str, ...],
                                                   explain: tuple[str, ...]) -> None:
    """keras200m's torch estimate printed its rules on one line of 2,101 characters, its total on one of 386 and its
    floor on one of 343; --explain included, no line is longer than LONGEST, stderr's warning neither."""
    out, err = _estimate(capsys, *args, *explain)
    assert not _too_long(out) and not _too_long(err), _too_long(out + err)


def test_the_rules_only_with_explain_one_a_line(capsys: pytest.CaptureFixture) -> None:
    """Without --explain one short line says how to see them; with it, the framework's rules and no other's, each
    rule starting a line, which put together again are its reasons word for word."""
    plain, _ = _estimate(capsys, "--model", "keras200m", "--framework", "torch")
    assert "--explain" in plain.splitlines()[-1] and "saved_tensors_hooks" not in plain
    explained, _ = _estimate(capsys, "--model", "keras200m", "--framework", "torch", "--explain")
    lines = explained.splitlines()
    start = lines.index("rules (torch), one a line, each with its reason:") + 1
    assert all(line.startswith(("  - ", "    ")) for line in lines[start:])
    rules = " ".join(line.strip() for line in lines[start:]).removeprefix("- ").split(" - ")
    assert "; ".join(rules) == " ".join(RULES["torch"].why.split()) and len(rules) == 18
    assert "jax.vjp residuals" not in explained and "nn_grad.py" not in explained


def _floor(out: str) -> str:
    lines = out.splitlines()
    start = next(index for index, line in enumerate(lines) if line.startswith("physical floor:"))
    return " ".join([lines[start], *(line.strip() for line in lines[start + 1:] if line.startswith("  "))])


def test_the_floor_speaks_of_the_framework_asked_about(capsys: pytest.CaptureFixture) -> None:
    """The floor said "XLA fuses each update into the backward pass" whatever the framework; now it names the one asked
    about, what its rules do with gradients, and no framework where none is asked about."""
    torch = _floor(_estimate(capsys, "--model", "keras200m", "--framework", "torch", "--device", "cpu")[0])
    assert "XLA" not in torch and "torch keeps them all until the update" in torch
    jax = _floor(_estimate(capsys, "--model", "keras200m", "--framework", "jax", "--device", "cuda")[0])
    assert "jax on cuda runs each update as soon as its gradient exists" in jax
    neutral = _floor(_estimate(capsys, "--model", "keras200m", "--device", "cpu")[0])
    assert not any(name in neutral for name in ("XLA", "torch", "jax", "keras", "tensorflow"))
    assert "a framework that runs each update as soon as its gradient exists holds a few" in neutral
    accumulating = _floor(_estimate(capsys, "--model", "resnet50", "--technique", "accumulate")[0])
    assert "one micro-batch with its targets and the gradients' sum" in accumulating


def _records(name: str) -> list[dict]:
    return accounting.reaccount(json.loads((ROOT / "results" / name).read_text()))


def _row(table: str, phase: str) -> list[str]:
    return next(line.split() for line in table.splitlines() if line.split()[:1] == [phase])


def test_the_phase_table_shows_the_estimate_and_the_view_its_error_is_against() -> None:
    """The table showed the estimate's error, never the estimate, nor which figure it was against: now the rise above
    the context (the driver's view) and the estimate of it are columns, the error's header names the rise."""
    record = next(r for r in _records("cpu-eb50ac8/default-cpu.json")
                  if (r["scenario"]["framework"], r["scenario"]["model"]) == ("torch", "resnet50"))
    table = readout.phase_table(record)
    header = table.splitlines()[1]
    assert "rise MiB" in header and "estimate MiB" in header and "error vs rise" in header
    driver = record["comparison"]["train_step_1"]["driver"]
    assert _row(table, "train_step_1")[3:6] == [mib(driver["measured"]), mib(driver["estimate"]),
                                                f"{driver['relative_error']:+.1%}"]
    assert "*" not in table and "rise: holds less the context phase's" in " ".join(table.split())
    pooled = next(r for r in _records("h100-ec3adfa/default-cuda.json")
                  if (r["scenario"]["framework"], r["scenario"]["allocator"]) == ("jax", "default"))
    assert "no rise: a pool mapped when the device started" in " ".join(readout.phase_table(pooled).split())


def test_a_mode_the_rules_do_not_model_says_so() -> None:
    """torch.compile's heatmap68 step showed a bare -83.6 %: the figure stays, marked, with a line saying that the
    rules and the constants are eager torch's and the estimate does not model compile."""
    records = _records("cpu-a4d9e61/compile-cpu.json")
    compiled = next(r for r in records if (r["scenario"]["framework"], r["scenario"]["model"],
                                           r["scenario"].get("execution")) == ("torch", "heatmap68", "compile"))
    table = readout.phase_table(compiled)
    assert _row(table, "train_step_1")[5].endswith("%*")
    assert "the estimate does not model compile" in " ".join(table.split())
    assert "torch's default execution (eager)" in " ".join(table.split())
    eager = next(r for r in records if (r["scenario"]["framework"], r["scenario"]["model"]) == ("torch", "probe"))
    assert "*" not in readout.phase_table(eager)


@pytest.mark.parametrize("name", ["cpu-a4d9e61/compile-cpu.json", "h100-ec3adfa/default-cuda.json",
                                  "h100-d2f1409/allocators-cuda.json"])
def test_every_line_of_a_phase_table_fits_a_terminal(name: str) -> None:
    """Every committed record's table (a pool's, a failure's long message, an unavailable mode's) and bench's
    one-line summary of it."""
    for record in _records(name):
        table = readout.phase_table(record)
        assert not _too_long(table), _too_long(table)
        assert readout.one_line(record)


def test_every_line_of_run_fits_a_terminal() -> None:
    done = run_cli("run", "--framework", "torch", "--model", "probe", "--device", "cpu")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "estimate MiB" in done.stdout and not _too_long(done.stdout + done.stderr), done.stdout
