"""The sweeps suite: see suites.bench.matrix.SUITES["sweeps"]."""

from suites.bench.harness import scenario_benchmark
from suites.bench.matrix import scenarios

test_scenario = scenario_benchmark("sweeps", scenarios("sweeps"))
