"""Facts about the orchestrating machine and the code, stamped into every record and run."""

from __future__ import annotations

import os
import platform
import socket
import subprocess
from functools import cache

from suites.registry import ROOT


@cache
def git_commit() -> str:
    """HEAD's hash, with '+dirty' when the code has changes, so a result names the code behind it.

    results/ is left out: it is what runs write, not the code that measured.
    """
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", ".", ":!results"],
                               cwd=ROOT, capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")


@cache
def machine() -> dict[str, object]:
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return {"hostname": socket.gethostname(), "platform": platform.platform(), "cpus": os.cpu_count(),
            "memory_bytes": memory, "python": platform.python_version()}
