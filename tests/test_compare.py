"""`python -m suites compare` as a CI gate: two runs of the same code pass, a grown gated figure fails with a verdict
line naming it, the CPU's run-to-run spread stored with a run decides which views are gated per framework, and two
runs with nothing to gate fail (a gate that cannot fail)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from models.record import atomic_write_json, phase
from suites.analysis import compare
from suites.run.registry import ROOT
from tests.conftest import run_cli

CPU = ROOT / "results" / "cpu-eb50ac8"
BASE, SAME_CODE = CPU / "repeat" / "default-cpu.json", CPU / "default-cpu.json"  # two runs at eb50ac8, one machine
GPU = ROOT / "results" / "h100-ec3adfa" / "default-cuda.json"
OLDER = ROOT / "results" / "cpu-0cef803" / "default-cpu.json"  # the same scenarios, before the anonymous figure


def _verdict(done: subprocess.CompletedProcess) -> str:
    """The last line of compare's output, which is always the verdict."""
    last = done.stdout.strip().splitlines()[-1]
    assert last.startswith("verdict: "), done.stdout + done.stderr
    return last


def _grown(source: Path, target: Path, framework: str, model: str, name: str, scale: float,
           reading: str = "anonymous", drop_spread: bool = False) -> Path:
    """A copy of a run with one training record's figure in one phase scaled (the bytes compare reads for it)."""
    run = json.loads(source.read_text())
    if drop_spread:
        run.pop(compare.SPREAD_FIELD)
    record = next(r for r in run["records"] if r["status"] == "ok" and r["scenario"]["kind"] == "train"
                  and (r["scenario"]["framework"], r["scenario"]["model"]) == (framework, model))
    measured = phase(record, name)
    figures = ([measured["host"]["sampled_peak_rss_anon"]] if reading == "anonymous" else
               [measured["nvml"][key] for key in ("process_peak", "device_peak") if key in measured["nvml"]])
    for figure in figures:
        figure["bytes"] = round(figure["bytes"] * scale)
    atomic_write_json(target, run)
    return target


def test_two_committed_runs_of_the_same_code_pass_either_way_round() -> None:
    """The report that started it: jax resnet50's anonymous memory moved 11.2 % between two runs of one commit.
    Its measured spread, stored with both runs, takes that view out of the gate and the verdict says so."""
    for base, new in ((BASE, SAME_CODE), (SAME_CODE, BASE)):
        done = run_cli("compare", str(base), str(new))
        verdict = _verdict(done)
        assert done.returncode == 0 and verdict.startswith("verdict: pass: no gated figure grew beyond 5 %"), verdict
        assert "jax anonymous (repeats only within 11.2 %)" in verdict and "holds (the CPU's VmHWM" in verdict
        assert f"spread stored in {base}" in verdict


def test_the_stored_spread_is_what_store_spread_measures_and_adds_nothing_else(tmp_path: Path) -> None:
    """`--store-spread` on copies of the two runs without the field writes back exactly the committed files."""
    (tmp_path / "repeat").mkdir()
    copies = [tmp_path / "default-cpu.json", tmp_path / "repeat" / "default-cpu.json"]
    for committed, copy in zip((SAME_CODE, BASE), copies, strict=True):
        run = json.loads(committed.read_text())
        run.pop(compare.SPREAD_FIELD)
        atomic_write_json(copy, run)
    done = run_cli("compare", *map(str, copies), "--store-spread")
    assert done.returncode == 0 and "stored the run-to-run spread in" in done.stdout, done.stdout + done.stderr
    for committed, copy in zip((SAME_CODE, BASE), copies, strict=True):
        assert copy.read_text() == committed.read_text()
    spread = json.loads(SAME_CODE.read_text())[compare.SPREAD_FIELD]
    assert spread["against"] == "repeat/default-cpu.json" and spread["by"]["torch"]["anonymous"] < 0.01
    assert spread["by"]["jax"]["anonymous"] == pytest.approx(0.1117)
    both = run_cli("compare", *map(str, copies), "--store-spread", "--repeat", str(copies[1]))
    assert both.returncode == 2 and len(both.stderr.strip().splitlines()) == 1, both.stderr


def test_a_gated_figure_grown_25_percent_fails_and_the_verdict_names_it(tmp_path: Path) -> None:
    new = _grown(SAME_CODE, tmp_path / "new.json", "torch", "resnet50", "train_step_2", 1.25)
    done = run_cli("compare", str(BASE), str(new))
    verdict = _verdict(done)
    assert done.returncode == 1 and verdict.startswith("verdict: FAIL (exit 1): 1 gated figure grew beyond 5 %")
    assert "torch resnet50 train train_step_2 anonymous +25." in verdict and "MiB)" in verdict, verdict


def test_a_move_within_the_views_spread_passes_one_beyond_it_fails(tmp_path: Path) -> None:
    """keras-jax's anonymous memory repeats within 4.4 %: gated, but a fresh run's +7.8 % (the reported failure
    of --repeat) is within the threshold plus that spread; +25 % is not."""
    moved = run_cli("compare", str(BASE), str(_grown(BASE, tmp_path / "a.json", "keras-jax", "probe-deep",
                                                     "train_step_2", 1.078)))
    assert moved.returncode == 0 and "keras-jax anonymous" not in _verdict(moved), _verdict(moved)
    grown = run_cli("compare", str(BASE), str(_grown(BASE, tmp_path / "b.json", "keras-jax", "probe-deep",
                                                     "train_step_2", 1.25)))
    assert grown.returncode == 1 and "keras-jax probe-deep train train_step_2 anonymous +25.0 %" in _verdict(grown)


def test_without_a_stored_spread_the_cpu_gate_says_so_and_gates_as_before(tmp_path: Path) -> None:
    base = json.loads(SAME_CODE.read_text())
    base.pop(compare.SPREAD_FIELD)
    atomic_write_json(tmp_path / "base.json", base)
    new = _grown(BASE, tmp_path / "new.json", "torch", "resnet50", "train_step_2", 1.0, drop_spread=True)
    done = run_cli("compare", str(tmp_path / "base.json"), str(new))
    verdict = _verdict(done)
    assert done.returncode == 1 and "no run-to-run spread" in verdict, verdict
    assert "jax resnet50 train compile anonymous +11.2 % (982 -> 1,092 MiB)" in verdict
    # --repeat measures the same spread on the fly: the two runs of one code pass again
    again = run_cli("compare", str(tmp_path / "base.json"), str(new), "--repeat", str(new))
    assert again.returncode == 0 and "jax anonymous (repeats only within 11.2 %)" in _verdict(again)


def test_a_gpu_run_gates_the_allocator_and_the_driver_view(tmp_path: Path) -> None:
    same = run_cli("compare", str(GPU), str(GPU))
    assert same.returncode == 0 and _verdict(same).startswith("verdict: pass: no gated figure grew beyond 5 % (")
    assert "no run-to-run spread" not in _verdict(same)
    new = _grown(GPU, tmp_path / "new.json", "torch", "resnet50", "train_step_2", 1.25, reading="holds")
    done = run_cli("compare", str(GPU), str(new))
    assert done.returncode == 1 and "torch resnet50 train train_step_2 holds +25.0 %" in _verdict(done), done.stdout


def test_bad_input_is_one_line_and_exit_2(tmp_path: Path) -> None:
    done = run_cli("compare", str(BASE), str(tmp_path / "absent.json"))
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1 and "not a run file" in done.stderr
    assert "verdict" not in done.stdout
    run = json.loads(BASE.read_text())
    run[compare.SPREAD_FIELD] = {"by": 3}
    atomic_write_json(tmp_path / "spread.json", run)
    done = run_cli("compare", str(tmp_path / "spread.json"), str(SAME_CODE))
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1 and "repeat_spread is not" in done.stderr


def _kept(source: Path, target: Path, keep: Callable[[dict], bool], status: str | None = None) -> Path:
    """A copy of a run with only the records `keep` holds, each with `status` where one is given."""
    run = json.loads(source.read_text())
    run["records"] = [r | ({"status": status} if status else {}) for r in run["records"] if keep(r)]
    atomic_write_json(target, run)
    return target


def test_a_gate_with_nothing_to_gate_fails_and_says_why(tmp_path: Path) -> None:
    """It passed with "0 figures gated": two runs of different models, runs whose shared scenarios are ok in neither,
    and an older run without the anonymous figure (its allocator figure out of the gate by the newer's spread)."""
    probe = _kept(BASE, tmp_path / "probe.json", lambda r: r["scenario"]["model"] == "probe")
    others = _kept(SAME_CODE, tmp_path / "others.json", lambda r: r["scenario"]["model"] != "probe")
    failed = _kept(BASE, tmp_path / "failed.json", lambda r: True, status="error")
    for base, new, why in ((probe, others, "the two runs share no scenario: the base run has 10 scenario records, "
                                           "the new run has 35 scenario records"),
                           (failed, SAME_CODE, "the 45 scenarios both runs have (0 ok in both) give no figure to gate"),
                           (OLDER, SAME_CODE, "the 45 scenarios both runs have (45 ok in both) give no figure to gate "
                                              "(not gated: holds (the CPU's VmHWM")):
        done = run_cli("compare", str(base), str(new))
        verdict = _verdict(done)
        assert done.returncode == 1, verdict
        assert verdict.startswith(f"verdict: FAIL (exit 1): nothing gated, a gate that cannot fail: {why}"), verdict
    assert "keras-tensorflow needs (repeats only within 5.5 %); spread stored in" in verdict


def test_store_spread_of_runs_with_nothing_in_common_writes_nothing(tmp_path: Path) -> None:
    """An empty spread would replace the one a file stores: refused in one line, both files as they were."""
    probe = _kept(BASE, tmp_path / "probe.json", lambda r: r["scenario"]["model"] == "probe")
    others = _kept(SAME_CODE, tmp_path / "others.json", lambda r: r["scenario"]["model"] != "probe")
    before = [path.read_bytes() for path in (probe, others)]
    done = run_cli("compare", str(probe), str(others), "--store-spread")
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "no figure in common" in done.stderr and not done.stdout
    assert [path.read_bytes() for path in (probe, others)] == before
