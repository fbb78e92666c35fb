"""The executors that run ahead: `--jobs` here, and Ray, for real in its local form (one lane per GPU, pinned by
UUID, its next worker started ahead at its gate, into the same run store).

For Ray the GPUs are made up (`ray.init(num_gpus=2)`) and NVML is a FAKE (tests/fakes/pynvml.py) at its boundary:
this machine has no GPU. The scenarios run on the CPU; what is checked is where Ray put them and what the workers saw.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
import ray

from models.record import worker_seconds
from models.scenario import Scenario
from suites.run import executors, orchestrator
from suites.run.registry import ROOT
from suites.run.runfile import RunFile, identity, load
from tests.fakes.pynvml import GPUS

FAKES = Path(__file__).parent / "fakes"


def test_ray_runs_one_scenario_per_gpu_pinned_by_uuid_into_the_store(tmp_path: Path) -> None:
    scenarios = [Scenario.create("torch", "probe", kind="infer", device="cpu", batch=batch) for batch in (1, 2, 3, 4)]
    ray.init(num_cpus=2, num_gpus=2, log_to_driver=False,
             runtime_env={"env_vars": {"PYTHONPATH": f"{FAKES}:{ROOT}"}})  # the tasks' NVML is the fake
    try:
        executor = executors.create("ray", timeout=300)
        executor.start(scenarios)
        run = RunFile("default", "cpu", tmp_path / "default-cpu.json")
        run.request({identity(s.to_dict()): s.to_dict() for s in scenarios})
        for scenario in scenarios:
            run.add(executor.result(scenario))
        run.data["executor"] = executor.describe()
        run.finish()
        executor.close()
    finally:
        ray.shutdown()
    data = load(tmp_path / "default-cpu.json")
    assert data["complete"] and [r["status"] for r in data["records"]] == ["ok"] * 4
    assert data["executor"] == {"engine": "ray", "concurrency": 2, "overlap": True, "gpus": 2, "nodes": 1}
    spans: dict[str, list[tuple[float, float]]] = {}
    for record in data["records"]:
        uuid = record["run"]["placement"]["gpu_uuid"]
        assert uuid in GPUS and record["run"]["placement"]["host"] == record["run"]["host"]
        assert record["worker"]["visible_devices"] == {"CUDA_VISIBLE_DEVICES": uuid, "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
        start = record["run"]["started_at_unix"]  # its worker's start; it may touch the GPU from its release on
        released = start + ((record["run"]["overlap"] or {}).get("started_ahead_s") or 0.0)
        spans.setdefault(uuid, []).append((released, start + record["run"]["wall_seconds"]))
        if record["run"]["overlap"]:  # it waited at its gate for a part of its start ahead: not its own time
            assert 0 < record["worker"]["gate"]["waited_s"] <= record["run"]["overlap"]["started_ahead_s"]
            assert worker_seconds(record) < record["run"]["wall_seconds"]
    assert set(spans) == set(GPUS)  # both GPUs were used
    # each GPU's second scenario was started ahead, while its first measured, and released after the first ended
    assert sorted(bool(record["run"]["overlap"]) for record in data["records"]) == [False, False, True, True]
    for runs in spans.values():  # never two scenarios on one GPU at once
        runs.sort()
        assert all(earlier[1] <= later[0] for earlier, later in zip(runs, runs[1:], strict=False))


SAFETY_S = 300  # bounds a wait that only a hang would reach


def test_a_stop_keeps_a_record_whose_worker_ended_before_it_however_late_its_thread_reads_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """`--jobs 2`: the worker has ended on its own, and its thread is still turning what it left into a record (held
    here where it reads the worker's output) when the run stops. The stop waits for that thread and keeps the record,
    where it kept only the records already returned and lost this one."""
    executor = executors.create("local", timeout=SAFETY_S, jobs=2)
    reading = threading.Event()
    read_tail = orchestrator._tail

    def tail_after_the_stop(path: Path, lines: int = 15) -> str:
        reading.set()
        assert executor.stop.wait(SAFETY_S), "the executor was never stopped"
        return read_tail(path, lines)

    monkeypatch.setattr(orchestrator, "_tail", tail_after_the_stop)
    scenario = Scenario.create("torch", "probe", kind="infer", device="cpu")
    executor.start([scenario])
    assert reading.wait(SAFETY_S), "the worker never ended"
    kept = executor.close()
    assert [(record["scenario"], record["status"]) for record in kept] == [(scenario.to_dict(), "ok")]
