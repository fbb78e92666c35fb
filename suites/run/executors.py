"""How a suite's scenarios run: one at a time here (the default), N at once here (`--jobs`), or on Ray.

Every executor runs each scenario with `orchestrator.run_scenario` (a fresh worker process) and hands the
records back in the suite's order, so the run store, resume and the report work the same whatever ran them.
`start` is told every scenario to run before the first is asked for, so the concurrent executors can work
ahead; `result` waits for one. Ray is imported only by its executor: the default needs no Ray.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import socket
import threading
from concurrent.futures import Future, ThreadPoolExecutor

from models.scenario import Scenario
from suites.run import nvml, orchestrator
from suites.run.registry import ROOT, SetupError
from suites.run.runfile import identity

ENGINES = ("local", "ray")


class Sequential:
    """One scenario at a time, in the calling thread, when it is asked for (what the suites always did)."""

    engine, concurrency = "local", 1

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout

    def start(self, scenarios: list[Scenario]) -> None:
        """Nothing runs ahead."""

    def result(self, scenario: Scenario) -> dict:
        return orchestrator.run_scenario(scenario, timeout=self.timeout)

    def describe(self) -> dict:
        return {"engine": self.engine, "concurrency": self.concurrency}

    def close(self) -> list[dict]:
        """Nothing runs ahead, so nothing is left to stop or to keep."""
        return []


class LocalJobs(Sequential):
    """N scenarios at once on this machine, each in its own worker; host peaks are per process, so they stay each
    scenario's own (wall times do not: the scenarios share the cores)."""

    def __init__(self, timeout: float, jobs: int) -> None:
        super().__init__(timeout)
        self.concurrency = jobs
        self.pool = ThreadPoolExecutor(jobs, thread_name_prefix="footprint-job")
        self.futures: dict[str, Future] = {}
        self.stop = threading.Event()  # set by `close`: no worker starts after it

    def start(self, scenarios: list[Scenario]) -> None:
        for scenario in scenarios:
            self.futures[identity(scenario.to_dict())] = self.pool.submit(
                orchestrator.run_scenario, scenario, timeout=self.timeout, stop=self.stop)

    def result(self, scenario: Scenario) -> dict:
        future = self.futures.pop(identity(scenario.to_dict()), None)
        return future.result() if future else super().result(scenario)

    def close(self) -> list[dict]:
        """Cancels what has not started, kills the workers still running (after an interrupt) and waits for every
        thread; returns the records of the scenarios whose workers ended on their own, which the suite had not asked
        for yet: a stop keeps each, however close to it the worker ended or its thread read the record. A scenario
        whose worker the stop killed has none (`orchestrator.Stopped`): it is left to `missing`, and --resume runs
        it again."""
        self.pool.shutdown(wait=False, cancel_futures=True)
        orchestrator.stop_running(self.stop)
        self.pool.shutdown(wait=True)
        return [future.result() for future in self.futures.values()
                if not future.cancelled() and future.exception() is None]


def _run_pinned(scenario_json: dict, timeout: float) -> dict:
    """A Ray task: pins the worker to the GPU Ray gave this task, by UUID, then runs the scenario here."""
    import ray

    gpus = [str(gpu) for gpu in ray.get_gpu_ids()]
    uuid = None
    if gpus:  # an index within the node's visible GPUs (NVML's PCI order), or a UUID an outer variable named
        uuid = gpus[0] if not gpus[0].isdigit() else nvml.uuid_of(int(gpus[0]))
        os.environ.update({"CUDA_VISIBLE_DEVICES": uuid, "CUDA_DEVICE_ORDER": "PCI_BUS_ID"})
    record = orchestrator.run_scenario(Scenario.from_dict(scenario_json), timeout=timeout)
    record["run"]["placement"] = {"host": socket.gethostname(), "gpu_uuid": uuid, "ray_gpu_ids": gpus}
    return record


class RayCluster(Sequential):
    """One scenario per GPU at a time (per CPU where the cluster has no GPU), on a Ray cluster: joined at `address`,
    or started here. Each task runs the orchestrator's code on its node, which needs this checkout at the same
    path with its framework environments; the records come back here, into this run's store."""

    engine = "ray"

    def __init__(self, timeout: float, address: str | None) -> None:
        super().__init__(timeout)
        import ray

        self.ray = ray
        self.owned = not ray.is_initialized()
        if self.owned:  # the tasks import the suite from this checkout, with the caller's own path first
            path = os.pathsep.join(filter(None, (os.environ.get("PYTHONPATH"), str(ROOT))))
            ray.init(address=address, runtime_env={"env_vars": {"PYTHONPATH": path}}, log_to_driver=False)
        self.gpus = int(ray.cluster_resources().get("GPU", 0))
        self.concurrency = self.gpus or int(ray.cluster_resources().get("CPU", 1))
        self.task = ray.remote(_run_pinned)
        self.refs: dict[str, object] = {}

    def start(self, scenarios: list[Scenario]) -> None:
        task = self.task.options(num_gpus=1) if self.gpus else self.task.options(num_cpus=1)
        for scenario in scenarios:
            self.refs[identity(scenario.to_dict())] = task.remote(scenario.to_dict(), self.timeout)

    def result(self, scenario: Scenario) -> dict:
        ref = self.refs.pop(identity(scenario.to_dict()), None)
        if ref is None:
            self.start([scenario])
            ref = self.refs.pop(identity(scenario.to_dict()))
        return self.ray.get(ref)

    def describe(self) -> dict:
        return super().describe() | {"gpus": self.gpus, "nodes": len(self.ray.nodes())}

    def close(self) -> list[dict]:
        """Keeps the records of the tasks that had finished, cancels what is left (a task's worker dies with the Ray
        process that started it), and stops a cluster this run started."""
        refs = list(self.refs.values())
        ready, running = self.ray.wait(refs, num_returns=len(refs), timeout=0) if refs else ([], [])
        finished = []
        for ref in ready:
            with contextlib.suppress(Exception):  # a task that failed has no record to keep
                finished.append(self.ray.get(ref))
        for ref in running:
            self.ray.cancel(ref, force=True)
        if self.owned:
            self.ray.shutdown()
        return finished


def check(engine: str, jobs: int, address: str | None) -> None:
    """Refuses, in one line and before anything runs, a combination that cannot work."""
    if engine not in ENGINES:
        raise SetupError(f"unknown executor {engine!r}; valid: {', '.join(ENGINES)}")
    if jobs < 1:
        raise SetupError(f"--jobs must be a positive integer, got {jobs}")
    if engine == "ray" and jobs > 1:
        raise SetupError("--jobs is for the local executor: Ray runs one scenario per GPU (or CPU) at a time")
    if engine != "ray" and address:
        raise SetupError("--address is for --executor ray")
    if engine == "ray" and importlib.util.find_spec("ray") is None:
        raise SetupError("--executor ray needs Ray in the orchestrator's environment: "
                         ".tox/bench/bin/pip install 'ray[default]'")


def create(engine: str, timeout: float, jobs: int = 1, address: str | None = None) -> Sequential:
    """The executor a run asked for: `local` with `jobs` at once, or `ray` (at `address`, or a cluster of its own)."""
    check(engine, jobs, address)
    if engine == "ray":
        return RayCluster(timeout, address)
    return LocalJobs(timeout, jobs) if jobs > 1 else Sequential(timeout)
