"""What `make gpu-check` runs, in order of value: each piece is a command of this project, with its small form
(`QUICK=1`) that runs the same machinery on the CPU in a few minutes, in `make test`.

A suite piece is `bench --resume` into the check's folder, so a piece stopped at the time limit loses at most the
scenario (a fit: the question) it was in, and the next call goes on there; the probes an earlier piece measured are
carried into it (suites/bench/check.py carry_probes). A test piece reruns whole: it is short.

Also what names the check's folder: its state file (STATE, each piece's state across calls) and its name by card
(`card_slug`, `same_card`). Plain data, so the check that runs the pieces (suites/bench/check.py) and the page
that sums a folder up (suites/report/check_page.py) both read it from here, below them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

STATE = "check.json"  # the folder's state: each piece's status, seconds and calls
# a piece's status there: not run yet, done (exit 0), ended (another exit: a result, not run again), stopped (at the
# limit, by a stop, or its run file held by another run: run again next call), skipped (none of its frameworks here)
PIECE_STATUSES = ("not run", "done", "ended", "stopped", "skipped")
VENDOR_WORDS = {"nvidia", "geforce", "tesla", "quadro", "amd", "radeon"}
DEFAULT_LIMIT_S = 540.0  # a call's seconds: 9 minutes, within a 10-minute call, with time to stop a piece and write
QUICK_FRAMEWORKS = ("torch", "jax")  # the two the GPU rows of the fault matrix name; each family's raw framework


@dataclass(frozen=True)
class Piece:
    name: str
    what: str  # in words, for the summary page
    suite: str = ""  # a bench suite, or "" for a test file
    arguments: tuple[str, ...] = ()  # after the suite's (bench) or the test file's (pytest) own
    quick: tuple[str, ...] | None = None  # the small form's, instead of `arguments` (None: the same)
    quick_frameworks: tuple[str, ...] = QUICK_FRAMEWORKS
    tests: str = ""  # a test file, for a test piece

    def arguments_for(self, quick: bool) -> tuple[str, ...]:
        return self.arguments if not quick or self.quick is None else self.quick

    def run_file(self, device: str) -> str | None:
        """The run file a suite piece writes in the folder."""
        return f"{self.suite}-{device}.json" if self.suite else None


# on the 2-core CPU the small forms run two workers at once: host peaks are per process (`bench --jobs`)
SMALL = ("--jobs", "2")
# The small forms' models: each worker is seconds of imports on the CPU, so each suite's small form runs the fewest
# scenarios that still take its own path: the default suite on the probe (its models then are the probes, which
# every later suite is given), fit's question searched to batch 4, the techniques suite without a technique and with
# one that recomputes (checkpointing), the probes suite on the probes and one probe of a layer kind.
PIECES = (
    Piece("default", "the default suite (keras200m, heatmap68, resnet50; on a GPU each pool off too)", "default",
          quick=("--models", "probe", *SMALL)),
    Piece("fit", "the fit suite: the stories' does-it-fit questions, each probe's record kept", "fit",
          ("--timeout", "240"), ("--models", "heatmap68", "--timeout", "240", "--max-batch", "4"), ("torch",)),
    Piece("techniques", "the techniques suite: the tricks on plain-16 and on the real nets (resnet50, densenet121)",
          "techniques", quick=("--models", "plain-2", "--techniques", "none,checkpoint", *SMALL),
          quick_frameworks=("torch",)),
    Piece("allocators", "the allocators suite: every allocator mode", "allocators",
          quick=("--models", "probe", *SMALL), quick_frameworks=("torch",)),
    Piece("compile", "the compile suite: every execution mode", "compile", quick=("--models", "probe", *SMALL),
          quick_frameworks=("jax",)),
    Piece("calibration", "tests/test_calibration.py: a known allocation seen by each view (GPU only; skips on a CPU)",
          tests="tests/test_calibration.py"),
    Piece("faults", "the fault matrix's device rows: out of memory, outside SIGKILL, SIGTERM of a bench, the budget "
          "probe that once hung, for torch and JAX", tests="tests/test_faults.py", arguments=("-k", "device_row")),
    Piece("probes", "the probes suite: the estimate's probes, per layer kind, and on a GPU with each pool off",
          "probes", quick=("--models", "probe-conv", *SMALL), quick_frameworks=("torch",)),
)
NAMES = tuple(piece.name for piece in PIECES)


def card_slug(name: str) -> str:
    """A folder's card part from NVML's name: "NVIDIA H100 80GB HBM3" is h100, "NVIDIA GeForce RTX 4090"
    rtx-4090 (vendor words and what follows the memory size dropped)."""
    words = []
    for word in re.split(r"[\s_-]+", name.lower()):
        if re.fullmatch(r"\d+gb", word):
            break
        if word and word not in VENDOR_WORDS:
            words.append(re.sub(r"[^a-z0-9.]", "", word))
    return "-".join(word for word in words if word) or "gpu"


def same_card(name: str, slug: str) -> bool:
    """Whether a folder of results/ is a check of the card `slug` names (`<slug>-<commit>`)."""
    return bool(re.fullmatch(rf"{re.escape(slug)}-([0-9a-f]{{7}}|unknown)(-.+)?", name))
