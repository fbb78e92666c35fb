"""`make gpu-check` in its small form on the CPU (`--quick`): every piece runs in small, a call cut off at its limit
loses at most the scenario it was in, the next call goes on there, and the folder holds the summary, the logs, the
environment and each suite's run file and report. What a GPU adds (the pieces in full) needs a GPU box."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from suites.analysis.constants import PROBES
from suites.bench import check
from suites.run.pieces import PIECES, STATE, card_slug, same_card
from suites.run.registry import ROOT
from suites.run.runfile import identity


def _check(*args: str, extra: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "suites", "check", "--device", "cpu", *args], cwd=ROOT,
                          capture_output=True, text=True, env=os.environ | (extra or {}))


# The first call is cut inside the default piece whatever the machine's speed: its probes' train scenarios (first in
# the suite) end and are kept, its infer scenarios hang until the limit ends the call. The limit, counted from the
# check's start, leaves the bench's start and a train probe room on a slow machine, and no more: each second past
# them is a hang waited out. 40 s against 23 s here with other tests keeping both cores busy (load 12).
CUT_INSIDE_DEFAULT = {"FOOTPRINT_FAULT": "context:hang@infer"}
CUT_LIMIT_S = "40"


@pytest.mark.parametrize(("name", "slug"), [("NVIDIA H100 80GB HBM3", "h100"), ("NVIDIA GeForce RTX 4090", "rtx-4090"),
                                            ("NVIDIA A100-SXM4-80GB", "a100-sxm4"), ("Tesla T4", "t4"),
                                            ("NVIDIA H200", "h200"), ("cpu", "cpu")])
def test_a_card_s_folder_is_named_by_its_model(name: str, slug: str) -> None:
    assert card_slug(name) == slug
    assert same_card(f"{slug}-c3d4247", slug) and same_card(f"{slug}-c3d4247-dirty", slug)
    assert not same_card(f"{slug}x-c3d4247", slug) and not same_card("local", slug)


def test_the_make_target_passes_its_settings_on() -> None:
    shown = subprocess.run(["make", "-n", "gpu-check", "DEVICE=cpu", "QUICK=1", "LIMIT=60", "PIECES=fit"], cwd=ROOT,
                           capture_output=True, text=True, check=True).stdout
    assert "-m suites check --device \"cpu\" --limit \"60\" --pieces \"fit\"" in shown and "--quick" in shown


def test_an_unknown_piece_is_one_line_and_exit_2() -> None:
    done = _check("--quick", "--pieces", "default,nonsense")
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "valid: default, fit" in done.stderr
    done = _check("--quick", "--wheels", "/no/such/folder")
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "no such folder" in done.stderr


def test_the_small_form_runs_every_piece_resumes_after_its_limit_and_leaves_the_folder() -> None:
    target = check.folder("cpu", quick=True)
    shutil.rmtree(target, ignore_errors=True)  # a run of the same commit's state would run nothing
    cut = _check("--quick", "--limit", CUT_LIMIT_S, extra=CUT_INSIDE_DEFAULT)  # stopped inside default: exit 3
    state = json.loads((target / STATE).read_text())
    assert cut.returncode == 3 and "run it again to go on" in cut.stdout, cut.stdout[-3000:] + cut.stderr
    assert state["pieces"]["default"]["status"] == "stopped"
    assert all(state["pieces"][piece.name]["status"] == "not run" for piece in PIECES[1:])
    kept = json.loads((target / "default-cpu.json").read_text())["records"]  # what finished before the stop

    done = _check("--quick", "--limit", "1200")
    state = json.loads((target / STATE).read_text())
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr
    assert {name: entry["status"] for name, entry in state["pieces"].items()} == {
        piece.name: "done" for piece in PIECES}
    final = {identity(record["scenario"]): record for record in
             json.loads((target / "default-cpu.json").read_text())["records"]}
    assert kept and all(final[identity(record["scenario"])]["run"]["started_at_unix"] == record["run"][
        "started_at_unix"] for record in kept)  # the second call went on, not over: what the first measured stays
    assert state["pieces"]["default"]["calls"] == 2 and len(state["calls"]) == 2
    probes = {key: record["run"]["started_at_unix"] for key, record in final.items() if record["scenario"]["model"]
              in PROBES and record["scenario"]["framework"] == "torch"}
    carried = {identity(record["scenario"]): record["run"]["started_at_unix"] for record in
               json.loads((target / "techniques-cpu.json").read_text())["records"] if record["scenario"]["model"] in
               PROBES}
    assert probes and carried == probes  # each probe measured once, by the first piece, and carried to the others
    for piece in PIECES:
        assert (target / "logs" / f"{piece.name}.log").stat().st_size > 0
        if piece.suite:
            run = json.loads((target / f"{piece.suite}-cpu.json").read_text())
            assert run["complete"], piece.name
            assert (target / f"{piece.suite}-cpu.md").exists()
    environment = json.loads((target / "environment.json").read_text())
    assert set(environment["interpreters"]) == set(state["frameworks"])
    assert environment["interpreters"]["torch"]["packages"]["torch"]["version"]
    page = (target / "README.md").read_text()
    for piece in PIECES:
        assert f"| [{piece.name}]" in page or f"| {piece.name} | done" in page
    assert "## Against the newest earlier run on this card" in page and "verdict" in page
    assert "The default suite took" in page


def test_an_earlier_run_file_that_cannot_be_read_carries_nothing_and_says_so(tmp_path: Path,
                                                                            capsys: pytest.CaptureFixture) -> None:
    """A corrupt run file of an earlier piece (default's) is passed over in one line, not a traceback: the later
    piece (techniques) then measures its probes itself."""
    (tmp_path / "default-cpu.json").write_text("{not json")
    techniques = next(piece for piece in PIECES if piece.name == "techniques")
    assert check.carry_probes(techniques, tmp_path, "cpu", ["torch"]) == 0
    said = capsys.readouterr().err
    assert said.count("\n") == 1 and "default-cpu.json cannot be read as a run file" in said


def test_carried_wheels_go_into_a_keras_interpreter_that_lacks_keras(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """A GPU image without a registry: Keras comes from wheels carried there (a stand-in wheel here), installed
    offline into the prepared interpreter once; an interpreter that has keras is left alone."""
    venv = tmp_path / "prepared"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    with zipfile.ZipFile(wheels / "keras-0.0.1-py3-none-any.whl", "w") as wheel:
        wheel.writestr("keras/__init__.py", "")
        wheel.writestr("keras-0.0.1.dist-info/METADATA", "Metadata-Version: 2.1\nName: keras\nVersion: 0.0.1\n")
        wheel.writestr("keras-0.0.1.dist-info/WHEEL", "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        wheel.writestr("keras-0.0.1.dist-info/RECORD", "")
    python = str(venv / "bin" / "python")
    monkeypatch.setenv("FOOTPRINT_PYTHON", python)
    assert check.install_wheels(wheels, "cpu") == {"folder": str(wheels), "wheels": ["keras-0.0.1-py3-none-any.whl"],
                                                   "installed_into": {python: True}}
    assert subprocess.run([python, "-c", "import keras"]).returncode == 0
    assert check.install_wheels(wheels, "cpu")["installed_into"] == {}  # it has keras now


def test_a_folder_begun_by_another_commit_is_refused_in_one_line(tmp_path: Path) -> None:
    """--out onto a folder another commit's check began would mix two codes' figures in one folder."""
    (tmp_path / STATE).write_text(json.dumps({"kind": check.KIND, "device": "cpu", "quick": True,
                                              "git_commit": "0" * 40, "pieces": {}, "calls": []}))
    done = _check("--quick", "--out", str(tmp_path))
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "another check's state" in done.stderr
