"""JAX's build compiles per distinct shape, never per layer: each compiled executable holds host memory (about
0.4 MiB on the CPU), so an adapter that compiled one per layer would measure itself, not the net."""

from __future__ import annotations

import json
import subprocess

from suites.run.orchestrator import worker_environment
from suites.run.registry import ROOT, interpreter

COUNT_BUILD_COMPILES = """
import json, sys
from frameworks.jax_adapter import JaxAdapter
from models.scenario import Scenario
compiles, counts = [], {}
for model in sys.argv[1:]:
    adapter = JaxAdapter(Scenario.create("jax", model, kind="train", device="cpu"))
    adapter.import_framework()
    adapter.init_device()
    if not counts:  # one listener for the process, once JAX is imported
        import jax
        jax.monitoring.register_event_duration_secs_listener(
            lambda event, seconds, **_: compiles.append(event) if event.endswith("backend_compile_duration") else None)
    before = len(compiles)
    adapter.build()
    counts[model] = len(compiles) - before
print(json.dumps(counts))
"""


def test_a_deeper_net_of_the_same_layers_compiles_nothing_more_in_build() -> None:
    done = subprocess.run([interpreter("jax"), "-c", COUNT_BUILD_COMPILES, "plain-64", "plain-8"], cwd=ROOT,
                          env=worker_environment(), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    counts = json.loads(done.stdout.strip().splitlines()[-1])
    assert counts["plain-64"] > 0 and counts["plain-8"] == 0  # plain-8's shapes were all compiled for plain-64
