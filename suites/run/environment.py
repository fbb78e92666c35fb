"""Facts about the orchestrating machine and the code, stamped into every record and run."""

from __future__ import annotations

import os
import platform
import socket
import subprocess
from functools import cache
from pathlib import Path

from suites.run.registry import ROOT

COMMIT_VARIABLE = "FOOTPRINT_GIT_COMMIT"


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()


@cache
def git_commit() -> str:
    """HEAD's hash, with '+dirty' when the code has changes, so a result names the code behind it.

    Only a checkout whose top is this project counts: a copy exported inside another repository would
    otherwise be stamped with that repository's HEAD. A copy without its own .git says 'unknown', unless
    whoever copied it names the commit in FOOTPRINT_GIT_COMMIT. results/ is left out of '+dirty': it is
    what runs write, not the code that measured.
    """
    if os.environ.get(COMMIT_VARIABLE):
        return f"{os.environ[COMMIT_VARIABLE]} (from {COMMIT_VARIABLE})"
    try:
        if Path(_git("rev-parse", "--show-toplevel")).resolve() != ROOT.resolve():
            return f"unknown: {ROOT} is not the top of a git checkout (set {COMMIT_VARIABLE})"
        head = _git("rev-parse", "HEAD")
        dirty = _git("status", "--porcelain", "--untracked-files=no", "--", ".", ":!results")
    except (OSError, subprocess.CalledProcessError):
        return f"unknown: no git checkout at {ROOT} (set {COMMIT_VARIABLE})"
    return head + ("+dirty" if dirty else "")


@cache
def machine() -> dict[str, object]:
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return {"hostname": socket.gethostname(), "platform": platform.platform(), "cpus": os.cpu_count(),
            "memory_bytes": memory, "python": platform.python_version(), "cpu": cpu()}


def cpu(cpuinfo: Path = Path("/proc/cpuinfo")) -> dict[str, object]:
    """The CPU's model and whether it has AVX-512: TensorFlow turns oneDNN (and with it its CPU allocator's
    statistics) on by default only on some CPUs, so two runs of one commit can differ by the CPU alone."""
    try:
        text = cpuinfo.read_text(errors="replace")
    except OSError:  # not Linux: the model as Python knows it, the flags unknown
        return {"model": platform.processor() or "unknown", "avx512": None}
    fields = dict(line.split(":", 1) for line in text.splitlines() if ":" in line)  # the last CPU's, alike on each
    fields = {key.strip(): value.strip() for key, value in fields.items()}
    return {"model": fields.get("model name", "unknown"), "avx512": "avx512f" in fields.get("flags", "").split()}
