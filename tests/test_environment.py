"""A result names the code that measured it, or says it cannot."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from suites.run.registry import ROOT

CODE = "from suites.run import environment; print(environment.git_commit())"


def _commit(cwd: Path, **env: str) -> str:
    done = subprocess.run([sys.executable, "-c", CODE], cwd=cwd, capture_output=True, text=True, timeout=60,
                          env={k: v for k, v in os.environ.items() if k != "FOOTPRINT_GIT_COMMIT"} | env)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_a_copy_exported_into_another_repository_is_not_stamped_with_its_head(tmp_path: Path) -> None:
    """The first GPU run's files read the HEAD of the repository the tree had been copied into."""
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    copy = tmp_path / "export"
    for folder in ("suites", "models", "frameworks"):
        shutil.copytree(ROOT / folder, copy / folder, ignore=shutil.ignore_patterns("__pycache__"))
    assert _commit(copy).startswith("unknown: ")
    assert _commit(copy, FOOTPRINT_GIT_COMMIT="d2f1409") == "d2f1409 (from FOOTPRINT_GIT_COMMIT)"


def test_this_checkout_is_stamped_with_its_head() -> None:
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    if not head:
        pytest.skip("this tree is not a git checkout")
    assert _commit(ROOT).removesuffix("+dirty") == head


@pytest.mark.parametrize(("flags", "avx512"), [("fpu avx2 fma", False), ("fpu avx2 avx512f avx512bw", True)])
def test_a_run_names_the_cpu_and_whether_it_has_avx512(tmp_path: Path, flags: str, avx512: bool) -> None:
    """TensorFlow's oneDNN, and with it its CPU allocator's statistics, is on by default only on some CPUs: an AMD
    EPYC without AVX-512 turned it off (issue 64)."""
    from suites.run import environment

    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(f"processor\t: 0\nmodel name\t: AMD EPYC 7B13\nflags\t\t: {flags}\n\n"
                       f"processor\t: 1\nmodel name\t: AMD EPYC 7B13\nflags\t\t: {flags}\n")
    assert environment.cpu(cpuinfo) == {"model": "AMD EPYC 7B13", "avx512": avx512}
    assert environment.cpu(tmp_path / "missing")["avx512"] is None
