"""`python -m suites compare` as a CI gate: two runs of the same code pass, a grown gated figure fails with a verdict
line naming it, the CPU's run-to-run spread stored with a run decides which views are gated per framework, two
runs with nothing to gate fail (a gate that cannot fail), and the output a person reads is what the verdict rests on,
each scenario named, every line bounded."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from models.record import atomic_write_json, phase
from models.scenario import Scenario
from suites.analysis import compare
from suites.analysis.figures import MIB
from suites.run.registry import ROOT
from tests.conftest import run_cli

CPU = ROOT / "results" / "cpu-eb50ac8"
BASE, SAME_CODE = CPU / "repeat" / "default-cpu.json", CPU / "default-cpu.json"  # two runs at eb50ac8, one machine
GPU = ROOT / "results" / "h100-ec3adfa" / "default-cuda.json"
OLDER = ROOT / "results" / "cpu-0cef803" / "default-cpu.json"  # the same scenarios, before the anonymous figure
LATER_GPU = ROOT / "results" / "h100-c3d4247" / "default-cuda.json"  # GPU's and 10 noprealloc scenarios more


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
        notes = " ".join(line.strip() for line in done.stdout.splitlines()[1:-1])  # wrapped, above the verdict
        assert "jax anonymous (repeats only within 11.2 %)" in notes and "holds (the CPU's VmHWM" in notes
        assert f"spread stored in {base}" in notes
        assert done.stdout.splitlines()[0].endswith("none of 212 gated figures grew")


def test_runs_whose_workers_imported_other_packages_are_not_like_for_like() -> None:
    """Keras on torch in one interpreter holding scikit-learn imports it, SciPy and matplotlib, which its tox env's
    worker never does (and a worker that failed to hide jax imports jax): compare names the packages on each side,
    a few and a count. Records from before the field are not compared."""
    older, base, new = (json.loads(SAME_CODE.read_text()) for _ in range(3))
    tox = {"keras": "3.15.1", "numpy": "2.4.6", "torch": "2.13.0+cpu"}
    wider = tox | dict.fromkeys(["sklearn", "scipy", "matplotlib", "PIL", "psutil", "requests", "joblib", "six"])
    for run, imported in ((base, tox | {"jax": "0.10.2"}), (new, wider)):
        for record in run["records"]:
            if record["scenario"]["framework"] == "keras-torch":
                record["framework"]["imported_packages"] = imported
    assert compare.differences(base, base) == compare.differences(older, new) == []
    assert compare.differences(base, new) == [
        "keras-torch imported other packages in 9 scenarios both runs have: base only: jax; new only: joblib, "
        "matplotlib, PIL, psutil, requests, scipy and 2 more"]


def test_runs_with_onednn_on_and_off_are_not_like_for_like() -> None:
    """TensorFlow turns oneDNN on by default on some CPUs only (an AMD EPYC without AVX-512: off): its kernels and
    its allocator's figures differ. Records from before the field are not compared."""
    older, base, new = (json.loads(SAME_CODE.read_text()) for _ in range(3))
    for run, enabled in ((base, True), (new, False)):
        for record in run["records"]:
            if record["scenario"]["framework"] == "keras-tensorflow":
                record["framework"]["onednn"] = {"enabled": enabled, "set_by": "TensorFlow's default for this CPU"}
    assert compare.differences(base, base) == compare.differences(older, new) == []
    assert compare.differences(base, new) == ["keras-tensorflow oneDNN: on vs off"]


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
    assert "torch resnet50 train b8 train_step_2 anonymous +25." in verdict and "MiB)" in verdict, verdict
    assert "| torch resnet50 train b8 | train_step_2 | anonymous* |" in done.stdout  # the failing figure's row


def test_a_move_within_the_views_spread_passes_one_beyond_it_fails(tmp_path: Path) -> None:
    """keras-jax's anonymous memory repeats within 4.4 %: gated, but a fresh run's +7.8 % (the reported failure
    of --repeat) is within the threshold plus that spread; +25 % is not."""
    moved = run_cli("compare", str(BASE), str(_grown(BASE, tmp_path / "a.json", "keras-jax", "probe-deep",
                                                     "train_step_2", 1.078)))
    assert moved.returncode == 0 and "keras-jax anonymous" not in moved.stdout, moved.stdout
    grown = run_cli("compare", str(BASE), str(_grown(BASE, tmp_path / "b.json", "keras-jax", "probe-deep",
                                                     "train_step_2", 1.25)))
    assert grown.returncode == 1 and "keras-jax probe-deep train b1 train_step_2 anonymous +25.0 %" in _verdict(grown)


def test_without_a_stored_spread_the_cpu_gate_says_so_and_gates_as_before(tmp_path: Path) -> None:
    base = json.loads(SAME_CODE.read_text())
    base.pop(compare.SPREAD_FIELD)
    atomic_write_json(tmp_path / "base.json", base)
    new = _grown(BASE, tmp_path / "new.json", "torch", "resnet50", "train_step_2", 1.0, drop_spread=True)
    done = run_cli("compare", str(tmp_path / "base.json"), str(new))
    verdict = _verdict(done)
    assert done.returncode == 1 and "no run-to-run spread" in done.stdout, done.stdout
    assert verdict.startswith("verdict: FAIL (exit 1): 3 gated figures grew beyond 5 %: jax resnet50 train b8 "
                              "compile anonymous +11.2 % (982 -> 1,092 MiB)"), verdict
    # --repeat measures the same spread on the fly: the two runs of one code pass again
    again = run_cli("compare", str(tmp_path / "base.json"), str(new), "--repeat", str(new))
    assert again.returncode == 0 and "jax anonymous (repeats only within 11.2 %)" in again.stdout


def test_a_gpu_run_gates_the_allocator_and_the_driver_view(tmp_path: Path) -> None:
    same = run_cli("compare", str(GPU), str(GPU))
    assert same.returncode == 0 and _verdict(same).startswith("verdict: pass: no gated figure grew beyond 5 % (")
    assert "no run-to-run spread" not in same.stdout
    new = _grown(GPU, tmp_path / "new.json", "torch", "resnet50", "train_step_2", 1.25, reading="holds")
    done = run_cli("compare", str(GPU), str(new))
    assert done.returncode == 1 and "torch resnet50 train b8 train_step_2 holds +25.0 %" in _verdict(done), done.stdout


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
                           (OLDER, SAME_CODE, "the 45 scenarios both runs have (45 ok in both) give no figure to "
                                              "gate")):
        done = run_cli("compare", str(base), str(new))
        verdict = _verdict(done)
        assert done.returncode == 1, verdict
        assert verdict == f"verdict: FAIL (exit 1): nothing gated, a gate that cannot fail: {why}", verdict
    assert ("not gated: holds (the CPU's VmHWM: its file-backed pages move between runs), keras-tensorflow needs "
            "(repeats only within 5.5 %); spread stored in") in done.stdout


def test_store_spread_of_runs_with_nothing_in_common_writes_nothing(tmp_path: Path) -> None:
    """An empty spread would replace the one a file stores: refused in one line, both files as they were."""
    probe = _kept(BASE, tmp_path / "probe.json", lambda r: r["scenario"]["model"] == "probe")
    others = _kept(SAME_CODE, tmp_path / "others.json", lambda r: r["scenario"]["model"] != "probe")
    before = [path.read_bytes() for path in (probe, others)]
    done = run_cli("compare", str(probe), str(others), "--store-spread")
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "no figure in common" in done.stderr and not done.stdout
    assert [path.read_bytes() for path in (probe, others)] == before


def test_without_all_the_output_is_what_the_verdict_rests_on_and_every_line_is_bounded() -> None:
    """The first hour: 35 "only in the base run" lines and 47 changes in views out of the gate, then `verdict: pass`.
    Without --all: a line of counts and the failing gated figures, the scenarios only one run has counted; with it,
    every change and each such scenario; either way no line past compare.WIDTH and the verdict last."""
    for base, new, counts in ((OLDER, SAME_CODE, "none of 0 gated figures grew; 6 changes in ungated views: --all"),
                              (GPU, LATER_GPU, "4 of 352 gated figures grew; 9 shrank, 17 changes in ungated views, "
                                               "10 scenarios only in the new run: --all lists them")):
        short, every = (run_cli("compare", str(base), str(new), *flag) for flag in ((), ("--all",)))
        for done in short, every:
            assert done.returncode == 1 and _verdict(done)
            assert max(map(len, done.stdout.splitlines())) <= compare.WIDTH, done.stdout
        assert counts in short.stdout and "only in the" not in short.stdout.replace(" only in the new run: --all", "")
        assert len(short.stdout.splitlines()) <= 12 and len(every.stdout.splitlines()) > 300
    assert every.stdout.count("\nonly in the new run: ") == 10
    assert "\nonly in the new run: jax resnet50 train b8 noprealloc\n" in every.stdout
    # the failing figures all in the table, the verdict naming what fits and counting the rest
    assert short.stdout.count("| context | holds* |") == 3
    assert _verdict(short) == ("verdict: FAIL (exit 1): 4 gated figures grew beyond 5 %: keras-torch probe infer b1 "
                               "context holds +1525.0 % (32.0 -> 520 MiB) and 3 more (352 figures gated)")


def test_each_row_of_the_per_phase_table_names_its_scenario() -> None:
    """It gave one row per phase, each cell the largest move of some scenario the reader could not tell."""
    done = run_cli("compare", str(GPU), str(LATER_GPU), "--all")
    table = done.stdout.split("\n\n")[1].splitlines()[2:]
    assert done.stdout.startswith("Largest change per phase and figure over 36 scenarios both runs have (* gated):")
    assert len(table) == 20 and "| keras-torch probe infer b1 | context | holds* | 32.0 | 520.0 | +1525.0% | - |" \
        in table
    assert "| keras-jax resnet50 train b8 | train_step_1 | anonymous | 3,101.1 | 2,698.9 | -13.0% | - |" in table
    noprealloc = Scenario(framework="jax", model="resnet50", kind="train", batch=8, allocator="noprealloc")
    assert compare.name(noprealloc) == "jax resnet50 train b8 noprealloc"


def test_the_verdict_names_the_failing_figures_that_fit_and_counts_the_rest() -> None:
    """Three failing figures named and the notes in it made a verdict of 300 characters and more; it stays one line
    within compare.WIDTH, naming what fits (the table above lists them all) and counting the rest."""
    run = {"device": "cpu", "records": []}
    for scenario, ends in (("t", ", t18 p needs +48.0 % (100 -> 148 MiB) and 18 more (20 figures gated)"),
                           ("torch resnet50 train b", "+49.0 % (100 -> 149 MiB) and 19 more (20 figures gated)")):
        found = [compare.Change(f"{scenario}{i}", "p", "needs", 100 * MIB, (130 + i) * MIB, True, "torch")
                 for i in range(20)]
        code, ending = compare.verdict(run, run, found, 0.05, None)
        assert code == 1 and max(map(len, ending)) <= compare.WIDTH and ending[-1].endswith(ends), ending
        assert ending[-1].startswith(f"verdict: FAIL (exit 1): 20 gated figures grew beyond 5 %: {scenario}19 p ")
        assert ending[0].startswith("no run-to-run spread") and len(ending) == 2  # the note above the verdict
        assert compare.render(found, [], [], 0.05).count("| p | needs* |") == 20
