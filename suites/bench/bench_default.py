"""The default suite: keras200m train and infer, heatmap68 inference, every framework."""

from suites.bench.harness import scenario_benchmark
from suites.bench.matrix import scenarios

test_scenario = scenario_benchmark("default", scenarios("default"))
