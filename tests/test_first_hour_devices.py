"""The first hour (issue 33): a GPU command on a machine without a GPU is one line that says so, not a traceback nor
"run `make envs`"; what `run --out` writes is a run every command reads; the folders --out makes are said; no lock
file is left beside it."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from suites.analysis.compare import SPREAD_FIELD
from suites.run import device, runfile
from suites.run.registry import ROOT, SetupError, interpreter
from tests.conftest import run_cli
from tests.fakes import pynvml as fake_nvml

HEATMAP = ["--framework", "torch", "--model", "heatmap68", "--scenario", "infer", "--device", "cpu"]
GPU_COMMANDS = {"run": ["run", "--framework", "torch", "--model", "probe", "--device", "cuda"],
                "fit": ["fit", "--framework", "torch", "--model", "probe", "--budget", "1GiB", "--device", "cuda"],
                "bench": ["bench", "--frameworks", "torch", "--models", "probe", "--device", "cuda"]}


@pytest.mark.skipif(bool(device.gpu_names()), reason="NVML sees a GPU on this machine")
@pytest.mark.parametrize("command", GPU_COMMANDS.values(), ids=GPU_COMMANDS)
def test_a_gpu_command_without_a_gpu_is_one_line_that_says_so(command: list[str], tmp_path: Path) -> None:
    """Before: fit printed NVML's NVMLError_LibraryNotFound traceback (exit 1); run and bench said "no interpreter
    for torch on cuda: run `make envs`", which builds no CUDA environment without a GPU."""
    out = ["--out", str(tmp_path / "made" / "out.json")] if command[0] != "bench" else []
    done = run_cli(*command, *out)
    assert done.returncode == 2 and len(done.stderr.splitlines()) == 1, done.stderr[-2000:]
    assert "Traceback" not in done.stderr and "make envs" not in done.stderr
    assert "no GPU is visible (" in done.stderr and "--device cpu" in done.stderr, done.stderr
    assert not (tmp_path / "made").exists()  # refused before --out is touched


def test_estimate_on_cuda_still_needs_no_gpu() -> None:
    """Estimating for a card from published constants is legitimate anywhere."""
    done = run_cli("estimate", "--model", "probe", "--framework", "torch", "--device", "cuda")
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-2000:]


def _library_not_found() -> None:
    raise fake_nvml.NVMLError("NVML Shared Library Not Found")


def test_no_gpu_gives_nvmls_reason_before_any_interpreter_is_looked_for(monkeypatch: pytest.MonkeyPatch) -> None:
    """The one check every GPU command goes through (`registry.interpreter`), with NVML's own reason."""
    monkeypatch.setenv("FOOTPRINT_PYTHON", sys.executable)  # an interpreter is there: only the GPU can be missing
    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml)
    assert device.no_gpu("cuda") is None and interpreter("torch", "cuda") == sys.executable  # the fake's two GPUs
    monkeypatch.setattr(fake_nvml, "nvmlDeviceGetCount", lambda: 0)
    assert device.no_gpu("cuda") == ("--device cuda, but no GPU is visible (NVML sees no GPU): run on the CPU with "
                                     "--device cpu")
    monkeypatch.setattr(fake_nvml, "nvmlInit", _library_not_found)
    with pytest.raises(SetupError, match=r"no GPU is visible \(NVML: NVML Shared Library Not Found\): .*--device cpu"):
        interpreter("torch", "cuda")
    assert device.gpu_names() == [] and device.no_gpu("cpu") is None and interpreter("torch", "cpu") == sys.executable
    monkeypatch.setitem(sys.modules, "pynvml", None)  # not installed: importing it raises ImportError
    assert "(NVML's Python binding, nvidia-ml-py, is not installed)" in str(device.no_gpu("cuda"))


@pytest.fixture(scope="module")
def records(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, subprocess.CompletedProcess]:
    """Two records of the same scenario from `run --out`, the first into folders it had to make."""
    folder = tmp_path_factory.mktemp("records")
    base, new = folder / "a" / "b" / "base.json", folder / "a" / "b" / "new.json"
    first = run_cli("run", *HEATMAP, "--out", str(base))
    second = run_cli("run", *HEATMAP, "--out", str(new))
    assert first.returncode == second.returncode == 0, first.stderr[-2000:] + second.stderr[-2000:]
    assert "made folder" not in second.stderr  # it was there
    return base, new, first


def test_run_out_says_the_folder_it_made_and_leaves_no_lock(records: tuple) -> None:
    base, new, first = records
    assert first.stderr.splitlines() == [f"python -m suites: made folder {base.parent} for --out"]
    assert not list(base.parent.glob(".*.lock")), list(base.parent.iterdir())


def test_a_record_from_run_out_is_a_run_every_command_reads(records: tuple, tmp_path: Path) -> None:
    """Before: report, compare, errors and constants refused it ("not a run file"). The file stays the plain record;
    it reads as a run of that one record, which passes the same checks as a run file's records."""
    base, new, _ = records
    data = json.loads(base.read_text())
    assert "kind" not in data and "records" not in data
    run = runfile.load(base)
    assert (run["kind"], run["suite"], run["device"], run["complete"]) == (runfile.KIND, "run", "cpu", True)
    assert run["git_commit"] == data["run"]["git_commit"] and run["records"] == [runfile.read_record(data)]
    shown = run_cli("report", str(base))
    assert shown.returncode == 0 and base.with_suffix(".md").exists() and base.with_suffix(".png").exists(), shown
    compared = run_cli("compare", str(base), str(new), "--threshold", "1000")
    assert compared.returncode == 0, compared.stdout[-2000:] + compared.stderr[-2000:]
    wrong = run_cli("errors", str(base))
    assert wrong.returncode == 0 and f"| {base} | torch |" in wrong.stdout, wrong.stderr[-2000:]
    copies = [shutil.copy(path, tmp_path / path.name) for path in (base, new)]  # a stored spread reads back
    assert run_cli("compare", *map(str, copies), "--store-spread").returncode == 0
    assert SPREAD_FIELD in json.loads(Path(copies[0]).read_text())
    assert f"stored in {copies[0]}" in run_cli("compare", *map(str, copies), "--threshold", "1000").stdout  # its source
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(data | {"status": "finished"}))
    with pytest.raises(runfile.RunFileError, match="a record's status is 'finished'"):
        runfile.load(bad)


def test_constants_from_a_probe_record_written_over_an_earlier_record(records: tuple, tmp_path: Path) -> None:
    """`run --out` may write over a record file (never over a run file), and `constants` takes a probe record's."""
    earlier = Path(shutil.copy(records[0], tmp_path / "probe.json"))
    done = run_cli("run", "--framework", "torch", "--model", "probe", "--scenario", "infer", "--device", "cpu",
                   "--out", str(earlier))
    assert done.returncode == 0 and json.loads(earlier.read_text())["scenario"]["model"] == "probe", done.stderr
    taken = run_cli("constants", str(earlier))
    assert taken.returncode == 0 and (tmp_path / "constants-cpu.json").exists(), taken.stderr


def test_a_gpu_record_reads_as_a_run_on_its_own_card(tmp_path: Path) -> None:
    """A record measured elsewhere is described by its own GPU, never this machine's."""
    published = runfile.load(ROOT / "results" / "h100-c3d4247" / "default-cuda.json")
    record = published["records"][0]
    (tmp_path / "record.json").write_text(json.dumps(record))
    run = runfile.load(tmp_path / "record.json")
    assert (run["device"], run["device_description"]) == ("cuda", published["device_description"])
    assert run["machine"] == record["run"]["machine"] and run["git_commit"] == record["run"]["git_commit"]
