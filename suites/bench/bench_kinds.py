"""The kinds suite: the kind probes' training step, what one layer of each kind costs a compiling framework beyond
its tensors (suites.analysis.kind_costs); see suites.bench.matrix.SUITES["kinds"]."""

from suites.bench.harness import scenario_benchmark
from suites.bench.matrix import scenarios

test_scenario = scenario_benchmark("kinds", scenarios("kinds"))
