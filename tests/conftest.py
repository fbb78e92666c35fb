"""Helpers shared by the tests: real workers, started the way the orchestrator starts them."""

from __future__ import annotations

import fcntl
import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import psutil
import pytest

from models.protocol import write_scenario
from models.scenario import Scenario
from models.spec import ModelSpec
from suites.run import forward
from suites.run.orchestrator import run_scenario, worker_environment
from suites.run.registry import ROOT, frameworks, interpreter
from suites.run.runfile import KIND, identity

FRAMEWORKS = frameworks()


def published_json() -> list[Path]:
    """Every JSON file under results/ but results/local/ (a local bench's or check's, git-ignored): the tests over
    the published files read these alone, so what a local run left never changes what they check."""
    local = ROOT / "results" / "local"
    return [path for path in sorted((ROOT / "results").rglob("*.json")) if not path.is_relative_to(local)]


def published_runs() -> list[Path]:
    """The run files among `published_json`: not a constants file, a zoo's table or its training records."""
    return [path for path in published_json()
            if isinstance(data := json.loads(path.read_text()), dict) and data.get("kind") == KIND]


def run_worker(framework: str, *args: str, timeout: float = 600) -> str:
    """Runs a worker job in the framework's interpreter (a job's scenario as its file: models.protocol
    `write_scenario`); returns its stdout, fails the test on error."""
    done = subprocess.run([interpreter(framework), "-m", "frameworks.worker", *args], cwd=ROOT,
                          env=worker_environment(), capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def forward_all(nets: list[tuple[ModelSpec, dict[str, np.ndarray]]], folder: Path, training: bool = False,
                frameworks_run: tuple[str, ...] | list[str] = FRAMEWORKS) -> list[dict[str, dict[str, np.ndarray]]]:
    """The forward job (suites.run.forward) on each net's canonical arrays, in the tests' workers: per net, per
    framework, its output, loss and running statistics."""
    return forward.forward_all(nets, folder, frameworks_run, lambda framework, job: run_worker(framework, *job),
                               training)


def forward_everywhere(spec: ModelSpec, arrays: dict[str, np.ndarray], folder: Path, training: bool = False,
                       frameworks_run: tuple[str, ...] | list[str] = FRAMEWORKS) -> dict[str, dict[str, np.ndarray]]:
    """`forward_all` of one net."""
    return forward_all([(spec, arrays)], folder, training, frameworks_run)[0]


def workers_of(command: subprocess.Popen, ready: Callable[[], bool] = lambda: True) -> list[psutil.Process]:
    """The scenario workers below a running command, once `ready()` holds and one exists (none if it ended first)."""
    found: list[psutil.Process] = []
    while not found and command.poll() is None:
        time.sleep(0.1)
        if ready():
            found = [p for p in psutil.Process(command.pid).children(recursive=True)
                     if "frameworks.worker" in " ".join(p.cmdline())]
    return found


def gone(workers: list[psutil.Process]) -> bool:
    """Every one of `workers` has ended (a zombie counts: it holds no memory and waits only for its parent)."""
    return not any(w.is_running() and w.status() != psutil.STATUS_ZOMBIE for w in workers)


def run_cli(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    """`python -m suites ...` as a user types it, in this (framework-free) interpreter."""
    return subprocess.run([sys.executable, "-m", "suites", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout)


@pytest.fixture
def spec_file(tmp_path: Path):  # noqa: ANN201
    """Writes a spec dict to a JSON file and returns its path."""

    def write(spec: dict, name: str = "spec.json") -> Path:
        path = tmp_path / name
        path.write_text(json.dumps(spec))
        return path

    return write


def steps_in_one_worker(scenarios: list[Scenario], folder: Path) -> list[list[dict]]:
    """The worker's steps job: each training scenario's notes per step, every scenario in one worker of their one
    framework (its import paid once), for the checks of a framework's arithmetic (losses, what autograd saves); a
    scenario that fails fails the test with the worker's output."""
    frameworks_given = {scenario.framework for scenario in scenarios}
    assert len(frameworks_given) == 1, frameworks_given
    files = []
    for index, scenario in enumerate(scenarios):
        scenario_folder = folder / f"scenario{index}"
        scenario_folder.mkdir(parents=True, exist_ok=True)
        files.append(write_scenario(scenario.to_dict(), scenario_folder))
    return json.loads(run_worker(frameworks_given.pop(), "steps", *files))


@pytest.fixture(scope="session")
def shared_run(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Callable[[Scenario], dict]:
    """`run_scenario`, measured once per scenario for the whole session: tests in different files that read the same
    record (keras-small's training run per framework, the torch probe's) pay for one worker between them. The test
    processes (pytest-xdist) share each record through a folder all of them see, under a lock; each caller gets its
    own copy, so none can change another's."""
    root = tmp_path_factory.getbasetemp()
    # an xdist test process's basetemp is popen-gwN inside the session's; a pytest a test starts (the check's) inherits
    # xdist's environment variables but is no worker, so its own config says which it is
    folder = (root.parent if hasattr(request.config, "workerinput") else root) / "shared-runs"
    folder.mkdir(exist_ok=True)

    def run(scenario: Scenario) -> dict:
        key = identity(scenario.to_dict())
        with (folder / f"{key}.lock").open("w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # the other test process waits for this one's run, not a second run
            stored = folder / f"{key}.json"
            if not stored.exists():
                written = stored.with_suffix(".tmp")
                written.write_text(json.dumps(run_scenario(scenario)))
                written.replace(stored)  # whole or absent, should a run be stopped halfway
            return json.loads(stored.read_text())

    return run
