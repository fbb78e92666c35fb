"""Helpers shared by the tests: real workers, started the way the orchestrator starts them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from suites.run.orchestrator import worker_environment
from suites.run.registry import ROOT, frameworks, interpreter

FRAMEWORKS = frameworks()


def run_worker(framework: str, *args: str, timeout: float = 600) -> str:
    """Runs a worker job in the framework's interpreter; returns its stdout, fails the test on error."""
    done = subprocess.run([interpreter(framework), "-m", "frameworks.worker", *args], cwd=ROOT,
                          env=worker_environment(), capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


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
