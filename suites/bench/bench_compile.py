"""The compile suite: see suites.bench.matrix.SUITES["compile"]."""

from suites.bench.harness import scenario_benchmark
from suites.bench.matrix import scenarios

test_scenario = scenario_benchmark("compile", scenarios("compile"))
