"""The compile suite: see suites.matrix.SUITES["compile"]."""

from suites.harness import scenario_benchmark
from suites.matrix import scenarios

test_scenario = scenario_benchmark("compile", scenarios("compile"))
