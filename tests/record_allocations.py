"""Run in torch's interpreter: torch's own allocation order on this CPU, per phase, as JSON on stdout.

The profiler's memory events give each allocation and free with its address, in order; `tests/test_caching.py`
replays them through `models.estimate.caching` beside the order the estimate derives from the spec.
Usage: python -m tests.record_allocations MODEL BATCH KIND [TECHNIQUE]
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from collections.abc import Callable

from torch.profiler import ProfilerActivity, profile

from frameworks.torch_adapter import TorchAdapter
from models.scenario import Scenario


def recorded(run: Callable[[], object]) -> list[tuple[int, int]]:
    """(address, bytes) per event while `run` runs: bytes positive for an allocation, negative for a free."""
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as profiler:
        run()
    handle, path = tempfile.mkstemp(suffix=".json")
    os.close(handle)
    try:
        profiler.export_chrome_trace(path)
        events = [event for event in json.loads(open(path).read())["traceEvents"] if event.get("name") == "[memory]"]
    finally:
        os.unlink(path)
    return [(event["args"]["Addr"], event["args"]["Bytes"]) for event in sorted(events, key=lambda e: e["ts"])]


def main(model: str, batch: str, kind: str, technique: str = "none") -> None:
    adapter = TorchAdapter(Scenario.create("torch", model, batch=int(batch), kind=kind, device="cpu",
                                           technique=technique))
    adapter.import_framework()
    adapter.init_device()
    phases = {"build": adapter.build, "compile": adapter.compile}
    if kind == "train":
        phases |= {"train_step_1": adapter.train_step, "train_step_2": adapter.train_step}
    phases["inference"] = adapter.infer
    json.dump({name: recorded(run) for name, run in phases.items()}, sys.stdout)


if __name__ == "__main__":
    main(*sys.argv[1:])
