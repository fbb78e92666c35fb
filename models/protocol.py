"""What the orchestrator and a worker agree on across the process boundary, beside the record itself: both sides
import it, and neither imports the other (the orchestrator never imports a framework's code)."""

from __future__ import annotations

# The worker writes each line of its compile helper's output after this prefix: the orchestrator reads an
# out-of-memory line live, and names the compile phase for a helper's line whatever phase the worker has reached.
HELPER_PREFIX = "compile helper: "
# The orchestrator's NVML sampler's pipes, "ASK,HEAR" (file descriptors the worker inherits): the worker asks for a
# reading at each phase boundary and waits until it is taken, so a phase shorter than the interval has one.
MARK_VARIABLE = "FOOTPRINT_NVML_MARK"
