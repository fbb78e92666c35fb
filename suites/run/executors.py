"""How a suite's scenarios run: one at a time here (the default), N at once here (`--jobs`), or on Ray.

Every executor runs each scenario in a fresh worker process (`orchestrator.start_worker`, `finish`) and hands the
records back in the suite's order, so the run store, resume and the report work the same whatever ran them.
`start` is told every scenario to run before the first is asked for, so the executors can work ahead; `result`
waits for one. One at a time, the next scenario's worker starts while the current one measures and waits at its
gate after its import phase (`overlap`, the default; `--no-overlap` turns it off). Ray is imported only by its
executor: the default needs no Ray.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import socket
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor

from models.scenario import Scenario
from suites.run import nvml, orchestrator
from suites.run.registry import ROOT, SetupError
from suites.run.runfile import identity

ENGINES = ("local", "ray")


class Sequential:
    """One scenario at a time, in the calling thread, when it is asked for. With `overlap`, once a scenario's worker
    runs, the next scenario's starts and runs its import phase, then waits at its gate until the current one has
    exited: no two workers ever hold the device at once, and the import (an interpreter and a framework, seconds
    each) is off the critical path. The record's `run.overlap` names the phases that overlapped another worker."""

    engine, concurrency = "local", 1

    def __init__(self, timeout: float, overlap: bool = True) -> None:
        self.timeout, self.overlap = timeout, overlap
        self.following: dict[str, Scenario] = {}  # each scenario's next in the suite's order
        self.ahead: tuple[str, orchestrator.Started | dict] | None = None  # the next scenario's worker, held
        self.previous: tuple[str, float] | None = None  # the last worker's scenario and when it ended

    def start(self, scenarios: list[Scenario]) -> None:
        """Learns the order, whose next scenario each worker's run starts ahead."""
        self.following = {identity(current.to_dict()): upcoming
                          for current, upcoming in zip(scenarios, scenarios[1:], strict=False)}

    def result(self, scenario: Scenario) -> dict:
        key = identity(scenario.to_dict())
        started = self._take_ahead(key)
        if started is None:
            started = orchestrator.start_worker(scenario)
        upcoming = self.following.get(key) if self.overlap else None
        record = orchestrator.finish(started, self.timeout, (lambda: self._start_ahead(upcoming)) if upcoming else None,
                                     self.previous)
        if isinstance(started, orchestrator.Started):
            self.previous = (started.scenario.label, started.ended or time.monotonic())
        return record

    def _start_ahead(self, scenario: Scenario) -> None:
        """Starts `scenario`'s worker, held at its gate; where it cannot start now, it starts in its turn, where
        what stopped it is its own scenario's failure."""
        with contextlib.suppress(Exception):
            self.ahead = (identity(scenario.to_dict()), orchestrator.start_worker(scenario, held=True))

    def _take_ahead(self, key: str | None) -> orchestrator.Started | dict | None:
        """The worker started ahead for the scenario `key`, if that is the one; another is ended (the suite asked
        out of order, or, with None, stopped)."""
        ahead, self.ahead = self.ahead, None
        if ahead is None:
            return None
        if ahead[0] == key:
            return ahead[1]
        if isinstance(ahead[1], orchestrator.Started):
            ahead[1].abandon()
        return None

    def describe(self) -> dict:
        return {"engine": self.engine, "concurrency": self.concurrency, "overlap": self.overlap}

    def close(self) -> list[dict]:
        """Ends a worker started ahead that the suite never asked for (it stopped): it measured nothing."""
        self._take_ahead(None)
        return []


class LocalJobs(Sequential):
    """N scenarios at once on this machine, each in its own worker; host peaks are per process, so they stay each
    scenario's own (wall times do not: the scenarios share the cores)."""

    def __init__(self, timeout: float, jobs: int) -> None:
        super().__init__(timeout, overlap=False)  # its workers run at once already
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


def _pin_to_ray_gpu() -> tuple[list[str], str | None]:
    """Pins this Ray process's workers to the GPU Ray gave it, by UUID: (Ray's GPU ids, the UUID or None)."""
    import ray

    gpus = [str(gpu) for gpu in ray.get_gpu_ids()]
    uuid = None
    if gpus:  # an index within the node's visible GPUs (NVML's PCI order), or a UUID an outer variable named
        uuid = gpus[0] if not gpus[0].isdigit() else nvml.uuid_of(int(gpus[0]))
        os.environ.update({"CUDA_VISIBLE_DEVICES": uuid, "CUDA_DEVICE_ORDER": "PCI_BUS_ID"})
    return gpus, uuid


class _Lane:
    """A Ray actor holding one GPU (one CPU where the cluster has none): it runs its share of the suite one scenario
    at a time, as `Sequential` does here, so with `overlap` its next worker imports while its current one measures
    (the actor runs its calls in the order they were made)."""

    def __init__(self, timeout: float, overlap: bool) -> None:
        self.gpus, self.uuid = _pin_to_ray_gpu()
        self.executor = Sequential(timeout, overlap)

    def run(self, scenario_json: dict, following_json: dict | None) -> dict:
        """One scenario's record; `following_json`: this lane's next scenario, started ahead."""
        if following_json:
            self.executor.following[identity(scenario_json)] = Scenario.from_dict(following_json)
        record = self.executor.result(Scenario.from_dict(scenario_json))
        record["run"]["placement"] = {"host": socket.gethostname(), "gpu_uuid": self.uuid, "ray_gpu_ids": self.gpus}
        return record

    def close(self) -> None:
        self.executor.close()


class RayCluster(Sequential):
    """One scenario per GPU at a time (per CPU where the cluster has no GPU), on a Ray cluster: joined at `address`,
    or started here. Each GPU is a lane (`_Lane`, an actor) that takes every n-th scenario of the suite in its order
    and runs them one at a time, overlapped as here. Each lane runs the orchestrator's code on its node, which needs
    this checkout at the same path with its framework environments; the records come back here, into this run's
    store."""

    engine = "ray"

    def __init__(self, timeout: float, address: str | None, overlap: bool = True) -> None:
        super().__init__(timeout, overlap)
        import ray

        self.ray = ray
        self.owned = not ray.is_initialized()
        if self.owned:  # the tasks import the suite from this checkout, with the caller's own path first
            path = os.pathsep.join(filter(None, (os.environ.get("PYTHONPATH"), str(ROOT))))
            ray.init(address=address, runtime_env={"env_vars": {"PYTHONPATH": path}}, log_to_driver=False)
        self.gpus = int(ray.cluster_resources().get("GPU", 0))
        self.concurrency = self.gpus or int(ray.cluster_resources().get("CPU", 1))
        self.lane = ray.remote(_Lane).options(**({"num_gpus": 1} if self.gpus else {"num_cpus": 1}))
        self.lanes: list = []
        self.refs: dict[str, object] = {}

    def start(self, scenarios: list[Scenario]) -> None:
        """Deals the scenarios to the lanes in the suite's order, every n-th to one, and queues each lane's calls."""
        lanes = [self.lane.remote(self.timeout, self.overlap) for _ in range(min(self.concurrency, len(scenarios)))]
        self.lanes += lanes
        for index, lane in enumerate(lanes):
            share = scenarios[index::len(lanes)]
            for scenario, following in zip(share, [*share[1:], None], strict=True):
                self.refs[identity(scenario.to_dict())] = lane.run.remote(
                    scenario.to_dict(), following.to_dict() if following else None)

    def result(self, scenario: Scenario) -> dict:
        ref = self.refs.pop(identity(scenario.to_dict()), None)
        if ref is None:
            self.start([scenario])
            ref = self.refs.pop(identity(scenario.to_dict()))
        return self.ray.get(ref)

    def describe(self) -> dict:
        return super().describe() | {"gpus": self.gpus, "nodes": len(self.ray.nodes())}

    def close(self) -> list[dict]:
        """Keeps the records of the calls that had finished, ends the lanes (a lane's workers die with its process:
        each watches its parent) and stops a cluster this run started."""
        refs = list(self.refs.values())
        ready, _ = self.ray.wait(refs, num_returns=len(refs), timeout=0) if refs else ([], [])
        finished = []
        for ref in ready:
            with contextlib.suppress(Exception):  # a call that failed has no record to keep
                finished.append(self.ray.get(ref))
        for lane in self.lanes:
            self.ray.kill(lane)
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


def create(engine: str, timeout: float, jobs: int = 1, address: str | None = None, overlap: bool = True) -> Sequential:
    """The executor a run asked for: `local` with `jobs` at once, or `ray` (at `address`, or a cluster of its own);
    one at a time with `overlap` or without."""
    check(engine, jobs, address)
    if engine == "ray":
        return RayCluster(timeout, address, overlap)
    return LocalJobs(timeout, jobs) if jobs > 1 else Sequential(timeout, overlap)
