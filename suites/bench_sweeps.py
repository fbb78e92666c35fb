"""The sweeps suite: see suites.matrix.SUITES["sweeps"]."""

from suites.harness import scenario_benchmark
from suites.matrix import scenarios

test_scenario = scenario_benchmark("sweeps", scenarios("sweeps"))
