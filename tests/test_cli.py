"""The command line: bad input is one line naming the valid choices, exit 2, nothing written."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from models.catalogue import listed_models
from models.record import phase
from models.scenario import PHASES, Scenario
from suites.analysis import across_records
from suites.bench.matrix import fit_questions, scenarios
from suites.report import readout
from suites.report.render import render
from suites.run.registry import ROOT
from suites.run.runfile import load
from tests.conftest import published_runs, run_cli

VALID = ["--framework", "torch", "--model", "keras-small", "--scenario", "infer", "--device", "cpu"]


def _with(option: str, value: str) -> list[str]:
    args = list(VALID)
    args[args.index(option) + 1] = value
    return args


@pytest.mark.parametrize("args, names", [
    (_with("--framework", "mxnet"), ["jax", "keras-jax", "keras-tensorflow", "keras-torch", "torch"]),
    (_with("--model", "resnet"), ["keras200m", "heatmap68", "plain-N"]),
    (_with("--scenario", "serve"), ["train", "infer"]),
    (_with("--device", "tpu"), ["auto", "cpu", "cuda"]),
    ([*VALID, "--optimizer", "lbfgs"], ["sgd", "adam"]),
])
def test_unknown_choice_is_one_line_exit_2_nothing_written(args: list[str], names: list[str], tmp_path: Path) -> None:
    out = tmp_path / "record.json"
    done = run_cli("run", *args, "--out", str(out))
    assert done.returncode == 2
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert all(name in done.stderr for name in names), done.stderr
    assert not out.exists() and done.stdout == ""


@pytest.mark.parametrize("args, message", [
    (["run", *VALID, "--timeout", "0"], "--timeout: must be a positive number of seconds"),
    (["run", *VALID, "--timeout", "-5"], "--timeout: must be a positive number of seconds"),
    (["bench", "--suite", "default", "--timeout", "nan"], "--timeout: must be a positive number of seconds"),
    (["fit", "--framework", "torch", "--model", "probe", "--budget", "0.4B"], "at least one byte, got '0.4B'"),
    (["bench", "--suite", "default", "--jobs", "0"], "--jobs must be a positive integer, got 0"),
    (["bench", "--suite", "default", "--address", "ray://head:10001"], "--address is for --executor ray"),
    (["run", *VALID, "--batch", "1000000000"], "batch 1000000000: its physical floor is 340,461.7 GiB, more than"),
])
def test_bad_numbers_are_one_line_exit_2(args: list[str], message: str) -> None:
    done = run_cli(*args)
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert message in done.stderr and done.stdout == ""


@pytest.mark.parametrize("content, message", [
    ("{not json", "not valid JSON"),
    (json.dumps({"name": "x", "input_shape": [4, 4, 1], "loss": "mse", "layers": [{"type": "lstm"}]}),
     "unknown layer type 'lstm'; valid: conv2d"),
    (json.dumps([1, 2]), "must be a JSON object"),
])
def test_malformed_spec_file_is_one_line_exit_2(content: str, message: str, tmp_path: Path) -> None:
    spec, out = tmp_path / "spec.json", tmp_path / "record.json"
    spec.write_text(content)
    done = run_cli("run", "--framework", "jax", "--model-file", str(spec), "--out", str(out))
    assert done.returncode == 2
    assert len(done.stderr.strip().splitlines()) == 1 and message in done.stderr, done.stderr
    assert not out.exists()


def test_run_writes_a_complete_record_from_a_spec_file(spec_file, tmp_path: Path) -> None:  # noqa: ANN001
    spec = {"name": "mine", "input_shape": [8, 8, 2], "loss": "cross_entropy", "default_batch": 4,
            "layers": [{"type": "conv2d", "filters": 3}, {"type": "relu"}, {"type": "flatten"},
                       {"type": "dense", "units": 5}]}
    out = tmp_path / "record.json"
    done = run_cli("run", "--framework", "jax", "--model-file", str(spec_file(spec)), "--device", "cpu",
                   "--optimizer", "sgd", "--out", str(out))
    assert done.returncode == 0, done.stderr
    record = json.loads(out.read_text())
    # a person reads the phase table; the JSON went to --out (or to stdout with --json)
    lines = done.stdout.splitlines()
    head = next(index for index, line in enumerate(lines) if "holds MiB" in line)  # the model's path may wrap its label
    assert " ".join(line.strip() for line in lines[:head]) == f"{Scenario.from_dict(record['scenario']).label}: ok"
    assert [line.split()[0] for line in lines[head + 1:head + 1 + len(PHASES["train"])]] == list(PHASES["train"])
    assert record["status"] == "ok" and record["schema_version"] == 1
    assert record["scenario"]["batch"] == 4 and record["scenario"]["model_file"]
    assert [p["name"] for p in record["phases"]] == list(PHASES["train"])
    assert record["framework"]["param_count"] == record["model"]["param_count"] == (9 * 2 * 3 + 3) + (192 * 5 + 5)


def test_models_lists_the_catalogue_with_counts() -> None:
    done = run_cli("models")
    assert done.returncode == 0
    for spec in listed_models():
        assert f"{spec.param_count:,}" in done.stdout and spec.name in done.stdout


RUN_FILES = published_runs()


@pytest.mark.parametrize("run_file", RUN_FILES, ids=lambda path: str(path.relative_to(ROOT / "results")))
def test_every_committed_run_file_renders(run_file: Path, tmp_path: Path) -> None:
    """Run files from older commits lack later fields; the report must still read them."""
    copy = tmp_path / run_file.name
    shutil.copy(run_file, copy)
    written = render(copy)
    assert copy.with_suffix(".md").read_text().startswith("# footprint: suite") and all(p.exists() for p in written)


def test_a_partial_run_renders_what_exists_and_lists_what_is_missing(tmp_path: Path) -> None:
    """Runs cut short: probes only, a timeout whose worker never wrote, none at all; each lists what is missing."""
    run = json.loads((ROOT / "results" / "cpu-eb50ac8" / "default-cpu.json").read_text())
    kept, absent = run["records"][-1], run["records"][-2]["scenario"]
    cut_short = {"schema_version": 1, "status": "timeout", "scenario": kept["scenario"], "phases": [],
                 "failure": {"phase": None, "message": "no result after 1 s; the worker was killed"},
                 "nvml": {"available": False, "reason": "cpu"}, "run": kept["run"]}  # as older code wrote it
    probes = [r for r in run["records"] if r["scenario"]["model"].startswith("probe")]
    for name, records in (("probes", probes), ("timeout", [*probes, cut_short]), ("none", [])):
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(run | {"records": records, "missing": [absent], "complete": False}))
        render(path)
        report = path.with_suffix(".md").read_text()
        missing = readout.label(Scenario.from_dict(absent))
        assert "## Missing: 1 of the scenarios asked for have no record" in report and f"- {missing}" in report
    assert "| status | timeout |" in (tmp_path / "timeout.md").read_text()  # its section, with the status


def test_compare_gates_a_grown_peak_and_warns_when_runs_differ(tmp_path: Path) -> None:
    base = json.loads((ROOT / "results" / "cpu-eb50ac8" / "default-cpu.json").read_text())
    del base["repeat_spread"]  # TensorFlow's allocator repeats only within 5.5 %: with its spread it is not gated
    grown = json.loads(json.dumps(base))
    record = next(r for r in grown["records"] if r["scenario"]["model"] == "keras200m" and r["status"] == "ok"
                  and r["scenario"]["framework"] == "keras-tensorflow" and r["scenario"]["kind"] == "train")
    peak = phase(record, "train_step_2")["allocator"]["allocator_peak"]  # TensorFlow's own, reset each phase
    peak["bytes"] = int(peak["bytes"] * 1.10)
    record["framework"]["versions"] = {"tensorflow": "9.9.9"}
    paths = [tmp_path / "base.json", tmp_path / "new.json"]
    for path, run in zip(paths, (base, grown), strict=True):
        path.write_text(json.dumps(run))
    done = run_cli("compare", *map(str, paths))
    assert done.returncode == 1, done.stdout + done.stderr
    assert "| keras-tensorflow keras200m train" in done.stdout and "| train_step_2 | needs* |" in done.stdout
    assert "+10.0% |" in done.stdout and "Changes beyond 5.0%: 1" in done.stdout
    assert "warning: not like for like: keras-tensorflow versions:" in done.stderr
    assert run_cli("compare", *map(str, paths), "--threshold", "20").returncode == 0
    # a repeat of the base whose same figure moved 12 % on its own: the 10 % growth is within the spread
    peak["bytes"] = int(peak["bytes"] / 1.10 * 1.12)
    repeat = tmp_path / "repeat.json"
    repeat.write_text(json.dumps(grown))
    spread = run_cli("compare", *map(str, paths), "--repeat", str(repeat))
    assert spread.returncode == 0 and "beyond the run-to-run spread: none" in spread.stdout, spread.stdout
    bad = run_cli("compare", str(paths[0]), str(tmp_path / "absent.json"))
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1 and "not a run file" in bad.stderr


def test_sweeps_draw_a_line_only_where_it_fits_and_name_the_steps(monkeypatch: pytest.MonkeyPatch) -> None:
    """The committed sweeps run: TensorFlow's allocator on keras-small rises in a step between batch 32 and 64
    (story 3's "grew in steps"); torch's host peak lies on its line. A user's grid replaces the batch sweep only."""
    sweeps = load(ROOT / "results" / "cpu-4bbc599" / "sweeps-cpu.json")
    fits = {(f.framework, f.model): f for f in across_records.sweep_fits(sweeps, "batch")}
    steps = fits["keras-tensorflow", "keras-small"]
    assert not steps.linear and [(a, b) for a, b, _ in steps.steps] == [(32, 64)] and steps.steps[0][2] > 8 * 2**20
    assert fits["torch", "keras-small"].linear and fits["torch", "keras-small"].residual < 4 * 2**20
    monkeypatch.setenv("FOOTPRINT_BATCHES", "10,20,30")
    swept = {(s.model, s.batch) for s in scenarios("sweeps") if s.framework == "torch"}
    assert {b for m, b in swept if m == "keras-small"} == {10, 20, 30} and ("plain-8", 8) in swept
    done = run_cli("bench", "--suite", "sweeps", "--batches", "10,0")
    assert done.returncode == 2 and "--batches must be positive integers" in done.stderr


def test_techniques_keep_only_the_suites_scenarios_with_them(monkeypatch: pytest.MonkeyPatch) -> None:
    """`bench --techniques none,checkpoint` runs the suite's scenarios with those techniques (and the probes), all
    of them; one the suite never runs is refused in one line, naming those it runs."""
    every = scenarios("techniques")
    monkeypatch.setenv("FOOTPRINT_TECHNIQUES", "none,checkpoint")
    kept = scenarios("techniques")
    assert kept == [scenario for scenario in every if scenario.technique in ("none", "checkpoint")]
    assert {scenario.technique for scenario in kept} == {"none", "checkpoint"} and len(kept) < len(every)
    done = run_cli("bench", "--device", "cpu", "--suite", "default", "--techniques", "checkpoint")
    assert done.returncode == 2 and "this suite runs none, not checkpoint" in done.stderr, done.stderr
    assert done.stderr.count("\n") == 1


def test_max_batch_bounds_each_fit_question_and_only_those(monkeypatch: pytest.MonkeyPatch) -> None:
    """`bench --suite fit --max-batch N` lowers each question's bound to N (never raises it); a bound of no use
    (another suite, zero) is refused in one line."""
    own = {question.model: question.max_batch for question, _ in fit_questions()}
    monkeypatch.setenv("FOOTPRINT_MAX_BATCH", "16")
    bounded = [(question.model, question.max_batch) for question, _ in fit_questions()]
    assert bounded and all(bound == min(16, own[model]) for model, bound in bounded)
    assert {own[model] for model, _ in bounded} != {bound for _, bound in bounded}  # one question's was higher
    for arguments, message in ((["--suite", "default", "--max-batch", "4"], "bounds the fit suite's searches"),
                               (["--suite", "fit", "--max-batch", "0"], "--max-batch must be a positive integer")):
        done = run_cli("bench", "--device", "cpu", *arguments)
        assert done.returncode == 2 and message in done.stderr and done.stderr.count("\n") == 1, done.stderr


@pytest.mark.parametrize("model", ["probe", "probe-deep"])
def test_run_of_a_probe_prints_its_phase_table(model: str) -> None:
    """The probes' records feed the constants: `run` of one measured, then crashed reading them (c3d4247: KeyError
    'started_at', exit 1, no table)."""
    done = run_cli("run", "--framework", "torch", "--model", model, "--device", "cpu")
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert [line.split()[0] for line in done.stdout.splitlines()[2:7]] == ["import", "context", "build", "compile",
                                                                          "train_step_1"], done.stdout
