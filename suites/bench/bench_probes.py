"""The probes suite: the probes the estimate needs (probe, probe-deep and one per layer kind), train and infer, every
framework, on a GPU each pooling framework also with its pool off; see suites.bench.matrix.SUITES["probes"]."""

from suites.bench.harness import scenario_benchmark
from suites.bench.matrix import scenarios

test_scenario = scenario_benchmark("probes", scenarios("probes"))
