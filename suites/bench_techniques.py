"""The techniques suite: see suites.matrix.SUITES["techniques"]."""

from suites.harness import scenario_benchmark
from suites.matrix import scenarios

test_scenario = scenario_benchmark("techniques", scenarios("techniques"))
