"""The techniques suite: see suites.bench.matrix.SUITES["techniques"]."""

from suites.bench.harness import scenario_benchmark
from suites.bench.matrix import scenarios

test_scenario = scenario_benchmark("techniques", scenarios("techniques"))
