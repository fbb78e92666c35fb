"""The allocators suite: every allocator mode of every framework, NVML beside the allocator, per phase."""

from suites.harness import scenario_benchmark
from suites.matrix import scenarios

test_scenario = scenario_benchmark("allocators", scenarios("allocators"))
