"""The allocators suite: every allocator mode of every framework, NVML beside the allocator, per phase."""

from suites.bench.harness import scenario_benchmark
from suites.bench.matrix import scenarios

test_scenario = scenario_benchmark("allocators", scenarios("allocators"))
