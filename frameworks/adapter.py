"""The one interface every framework implements, so the worker runs all of them the same way.

An adapter module must not import its framework at module level: the worker sets the
framework's environment first, then calls `import_framework` inside the measured import phase.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, ClassVar

from models import allocator_modes
from models.scenario import Scenario
from models.spec import LayerShapes

if TYPE_CHECKING:
    import numpy as np


def init_bound(step: LayerShapes) -> float:
    """LeCun-uniform bound sqrt(3 / fan_in), the one init rule every adapter uses."""
    fan_in = math.prod(step.params["kernel"][:-1])
    return math.sqrt(3.0 / fan_in)


def listed(output: object) -> list:
    """A net's output as a list of its outputs: a net of several returns them as a tuple or a list."""
    return list(output) if isinstance(output, (list, tuple)) else [output]


class Adapter(ABC):
    """Builds the spec's net in one framework and runs the phases of a scenario."""

    name: ClassVar[str]

    def __init__(self, scenario: Scenario) -> None:
        self.scenario = scenario
        self.spec = scenario.spec

    @property
    def compiles_ahead(self) -> bool:
        """Compile in a helper process before the measured phases, into the framework's persistent compilation
        cache, which the worker's own compiles then load from: for a framework whose compile-time scratch (XLA's
        GPU autotuning) would land in a step's peak or set a peak counter that cannot be reset."""
        return False

    @property
    def input_shape(self) -> tuple[int, ...]:
        """The canonical (channels-last) shape of one input batch."""
        return (self.scenario.batch, *self.spec.input_shape)

    @property
    def target_shapes(self) -> list[tuple[int, ...]]:
        """Per output of the net: class labels for cross-entropy, else a canonical tensor shaped like the output."""
        cross_entropy = self.spec.loss == "cross_entropy"
        return [(self.scenario.batch,) if cross_entropy else (self.scenario.batch, *shape)
                for shape in self.spec.output_shapes]

    @property
    def classes(self) -> list[int]:
        """Per output, how many classes its labels draw from (a cross-entropy output is flat class scores)."""
        return [shape[0] for shape in self.spec.output_shapes]

    def environment(self) -> dict[str, str]:
        """Variables the framework reads at import or device start; set before `import_framework`."""
        return {}

    def cache_environment(self, folder: str) -> dict[str, str]:
        """Variables that point the framework's persistent compilation cache at `folder`: the helper writes it, the
        worker reads it (set before the import, in both)."""
        return {}

    def helper_environment(self) -> dict[str, str]:
        """What the compile helper changes in the worker's environment: it grows its memory as needed beside the
        worker's pool (the framework's pool-off mode: JAX's noprealloc, TensorFlow's growth), since a second
        pool of 75 % of the card would not fit."""
        scenario = self.scenario
        pool_off = allocator_modes.without_pool(scenario.framework)
        if pool_off is None or scenario.device != "cuda":
            return {}
        return allocator_modes.settings(scenario.framework, pool_off, scenario.cuda_module_loading,
                                        scenario.device)["env"]

    def warm_up(self) -> None:
        """In the compile helper, after `compile`: the steps the phases run, once each, so that whatever compiles at a
        first call (Keras's step, a key split) is in the cache the worker reads."""
        if self.scenario.kind == "train":
            self.train_step()
        self.infer()

    def allocator_reading(self) -> tuple[int, int] | None:
        """(bytes in use, peak bytes) of the device allocator now; None where it has no such figures (the CPU)."""
        return None

    def compile_counts(self) -> dict[str, int]:
        """How many executables the framework compiled, and loaded from its cache, in this process so far; in every
        phase's notes, so a phase that compiled shows it."""
        return {}

    @abstractmethod
    def import_framework(self) -> dict[str, str]:
        """Imports the framework; returns the versions worth recording."""

    @abstractmethod
    def init_device(self) -> str:
        """Starts the device runtime (the CUDA context on a GPU) and nothing else; returns its name."""

    def device_notes(self) -> dict[str, object]:
        """What the framework chose when its device started that a reader needs to read the figures (TensorFlow:
        oneDNN, and why its allocator has no figures where it has none); in the record's `framework`."""
        return {}

    @abstractmethod
    def build(self) -> None:
        """Creates the weights (LeCun uniform, zero bias) and one batch of synthetic data on the device."""

    @abstractmethod
    def param_count(self) -> int:
        """The trainable parameter count as the framework itself reports it."""

    @abstractmethod
    def statistics_count(self) -> int:
        """The non-trainable values the framework reports (batch norm's running statistics: torch's buffers)."""

    @abstractmethod
    def compile(self) -> dict[str, object]:
        """Does what the framework's idiom does before the first step; returns notes for the record."""

    @abstractmethod
    def train_step(self) -> dict[str, float]:
        """One optimizer step on the batch; returns notes with the loss (reading it also synchronizes)."""

    @abstractmethod
    def infer(self) -> dict[str, object] | None:
        """One forward pass on the batch with gradient tracking off; what it notes, if anything."""

    @abstractmethod
    def allocate(self, nbytes: int) -> object:
        """A filled fp32 array of `nbytes` on the device, held by the caller: the calibration target.

        It is copied from the host: a fill kernel would load its CUDA module in the same phase (lazy loading),
        and the driver would see the module beside the allocation."""

    def synchronize(self) -> None:
        """Waits for queued device work, so a reading belongs to the phase that caused it."""

    def reset_peaks(self) -> None:
        """Resets the allocator's peak counters where the framework allows it."""

    def counters(self) -> dict[str, dict]:
        """The allocator's own figures for the device, each with its semantics (see models.record)."""
        return {}

    def tensor_bytes(self) -> dict[str, int | None]:
        """Bytes of the model's own tensors held now, by category; None where the framework does not expose
        them (gradients that live only inside a compiled step). The measured side of the breakdown."""
        return {}

    def framework_estimate(self) -> dict[str, object]:
        """The framework's own prediction of the peak, where it has one that needs no measurement run."""
        return {}

    def is_oom(self, error: BaseException) -> bool:
        """Whether an exception is the framework saying it is out of memory."""
        return isinstance(error, MemoryError)

    @abstractmethod
    def set_weights(self, weights: list[dict[str, np.ndarray]]) -> None:
        """Loads canonical weights, one dict per layer as `LayerShapes.weights` names them: kernel (kh, kw, in /
        groups, out) or (in, out), bias, batch norm's scale, offset, mean and variance."""

    @abstractmethod
    def evaluate(self, batch: np.ndarray, targets: list[np.ndarray], training: bool) -> tuple[list[np.ndarray], float]:
        """One forward pass on a canonical (channels-last) batch, a target per output: the channels-last outputs and
        the spec's loss (one per output, summed).

        In training mode batch norm uses the batch's statistics and updates its running ones, as a training
        step's forward pass does; otherwise the running statistics are used and nothing changes."""

    @abstractmethod
    def statistics(self) -> list[dict[str, np.ndarray]]:
        """The running statistics now, one dict per layer (empty for layers without them)."""
