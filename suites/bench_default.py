"""The default suite: keras200m and heatmap68, train and infer, every framework."""

from suites.harness import scenario_benchmark
from suites.matrix import scenarios

test_scenario = scenario_benchmark("default", scenarios("default"))
