"""The default suite: keras200m train and infer, heatmap68 inference, every framework."""

from suites.harness import scenario_benchmark
from suites.matrix import scenarios

test_scenario = scenario_benchmark("default", scenarios("default"))
