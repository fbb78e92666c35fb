"""PyTorch: an eager nn.Sequential in channels-first layout.

The canonical layout is channels-last, so TensorFlow-style 'same' padding that is not
symmetric gets an explicit ZeroPad2d (an extra activation copy, as a torch user would write
it), and the dense layer after a flatten has its rows permuted when canonical weights load.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

from frameworks.adapter import Adapter, init_bound
from models import allocators, techniques
from models.record import AT_PHASE_END, PEAK_SINCE_PHASE_START, counter
from models.scenario import OPTIMIZER_SETTINGS
from models.spec import Conv2D, Dense, Flatten, MaxPool2D, ReLU, same_padding

if TYPE_CHECKING:
    import numpy as np
    import torch


def _channels_first(shape: tuple[int, ...]) -> tuple[int, ...]:
    return (shape[0], shape[-1], *shape[1:-1]) if len(shape) == 4 else shape


def _checkpointed(modules: list[torch.nn.Module]) -> torch.nn.Module:
    """A segment whose activations are recomputed in the backward pass (torch.utils.checkpoint)."""
    import torch.utils.checkpoint

    class Checkpointed(torch.nn.Sequential):
        def forward(self, inputs: torch.Tensor) -> torch.Tensor:
            return torch.utils.checkpoint.checkpoint(super().forward, inputs, use_reentrant=False)

    return Checkpointed(*modules)


def device_of(name: str) -> torch.device:
    """'cuda' as the indexed device 0 (the first CUDA_VISIBLE_DEVICES leaves): torch's per-device calls
    (set_per_process_memory_fraction, the memory statistics) refuse a CUDA device without an index."""
    import torch

    return torch.device("cuda", 0) if name == "cuda" else torch.device(name)


def _nbytes(tensor: torch.Tensor) -> int:
    return tensor.numel() * tensor.element_size()


class TorchAdapter(Adapter):
    name = "torch"

    def import_framework(self) -> dict[str, str]:
        global torch
        import torch

        return {"torch": torch.__version__, "cuda": str(torch.version.cuda)}

    def init_device(self) -> str:
        self.device = device_of(self.scenario.device)
        if self.device.type == "cuda" and not torch.cuda.is_available():
            raise RuntimeError(f"torch {torch.__version__} sees no CUDA device")
        mode, value = allocators.parse(self.name, self.scenario.allocator)
        if self.device.type == "cuda" and mode == "fraction":  # no variable for it: set before the first allocation
            torch.cuda.set_per_process_memory_fraction(float(value), self.device)
        torch.empty(1, device=self.device)  # the first allocation starts the CUDA context
        self.synchronize()
        if self.device.type == "cuda":
            return torch.cuda.get_device_name(self.device)
        return f"cpu ({torch.get_num_threads()} threads)"

    def _layers(self) -> list[list[torch.nn.Module]]:
        """The modules of each spec layer (a conv with uneven 'same' padding is two)."""
        nn, layers = torch.nn, []
        for step in self.spec.walk():
            layer, modules = step.layer, []
            layers.append(modules)
            if isinstance(layer, Conv2D):
                padding = (0, 0)
                if layer.padding == "same":
                    (top, bottom), (left, right) = (same_padding(size, layer.kernel, layer.stride)
                                                    for size in step.input_shape[:2])
                    if (top, left) == (bottom, right):
                        padding = (top, left)
                    else:
                        modules.append(nn.ZeroPad2d((left, right, top, bottom)))
                modules.append(nn.Conv2d(step.input_shape[2], layer.filters, layer.kernel, layer.stride,
                                         padding, bias=layer.bias, device=self.device))
            elif isinstance(layer, MaxPool2D):
                modules.append(nn.MaxPool2d(layer.pool, layer.step))
            elif isinstance(layer, Dense):
                modules.append(nn.Linear(step.input_shape[0], layer.units, bias=layer.bias, device=self.device))
            elif isinstance(layer, Flatten):
                modules.append(nn.Flatten())
            elif isinstance(layer, ReLU):
                modules.append(nn.ReLU(inplace=self.scenario.technique == "inplace"))
        return layers

    def _weighted(self) -> list[tuple[object, torch.nn.Module]]:
        """(spec step, module) for every layer that has weights, in order."""
        steps = [step for step in self.spec.walk() if step.params]
        modules = [m for m in self.model.modules() if isinstance(m, (torch.nn.Conv2d, torch.nn.Linear))]
        return list(zip(steps, modules, strict=True))

    def build(self) -> None:
        torch.manual_seed(0)
        layers = self._layers()
        if self.scenario.technique == "checkpoint":  # torch.utils.checkpoint over each segment of sqrt(N) layers
            self.model = torch.nn.Sequential(*(_checkpointed([m for i in segment for m in layers[i]])
                                               for segment in techniques.segments(len(layers))))
        else:
            self.model = torch.nn.Sequential(*(module for modules in layers for module in modules))
        with torch.no_grad():
            for step, module in self._weighted():
                bound = init_bound(step)
                module.weight.uniform_(-bound, bound)
                if module.bias is not None:
                    module.bias.zero_()
        self.inputs = torch.randn(_channels_first(self.input_shape), device=self.device)
        if self.spec.loss == "cross_entropy":
            self.targets = torch.randint(self.classes, self.target_shape, device=self.device)
        else:
            self.targets = torch.randn(_channels_first(self.target_shape), device=self.device)
        self.loss_fn = torch.nn.functional.mse_loss if self.spec.loss == "mse" else torch.nn.functional.cross_entropy

    def param_count(self) -> int:
        return sum(p.numel() for p in self.model.parameters())

    def compile(self) -> dict[str, object]:
        if self.scenario.kind == "infer":
            self.model.eval()
            return {"mode": "eager", "what": "nothing to compile: eval mode set"}
        settings = OPTIMIZER_SETTINGS[self.scenario.optimizer]
        self.scaler = torch.amp.GradScaler(self.device.type) if self.scenario.technique == "fp16" else None
        if self.scenario.optimizer in ("sgd", "momentum"):
            self.optimizer = torch.optim.SGD(self.model.parameters(), lr=settings["learning_rate"],
                                             momentum=settings["momentum"])
        else:
            self.optimizer = torch.optim.Adam(self.model.parameters(), lr=settings["learning_rate"],
                                              betas=(settings["beta_1"], settings["beta_2"]),
                                              eps=settings["epsilon"])
        self.model.train()
        return {"mode": "eager", "what": "optimizer created; gradients and its state are allocated at the first step"}

    def _precision(self) -> contextlib.AbstractContextManager:
        """torch.autocast for the mixed-precision techniques (the weights stay fp32)."""
        half = {"fp16": torch.float16, "bf16": torch.bfloat16}.get(self.scenario.technique)
        return torch.autocast(self.device.type, dtype=half) if half else contextlib.nullcontext()

    def _step(self) -> torch.Tensor:
        """zero_grad, forward and backward per micro-batch (one unless accumulating), then the update."""
        self.optimizer.zero_grad(set_to_none=True)
        micro = techniques.ACCUMULATION_STEPS if self.scenario.technique == "accumulate" else 1
        total = torch.zeros((), device=self.device)
        for inputs, targets in zip(self.inputs.chunk(micro), self.targets.chunk(micro), strict=True):
            with self._precision():
                loss = self.loss_fn(self.model(inputs), targets) / micro
            (self.scaler.scale(loss) if self.scaler else loss).backward()
            total += loss.detach()
        if self.scaler:
            self.scaler.step(self.optimizer)
            self.scaler.update()
        else:
            self.optimizer.step()
        if self.scenario.technique == "empty_cache":
            torch.cuda.empty_cache()  # the technique exists on CUDA only (models.techniques says so elsewhere)
        return total

    def train_step(self) -> dict[str, float]:
        """One step; autograd's saved-tensor hooks measure what the forward keeps for the backward."""
        owned = {t.untyped_storage().data_ptr() for t in (*self.model.parameters(), self.inputs, self.targets)}
        saved: dict[int, int] = {}

        def pack(tensor: torch.Tensor) -> torch.Tensor:
            storage = tensor.untyped_storage()
            if storage.data_ptr() not in owned:
                saved[storage.data_ptr()] = storage.nbytes()
            return tensor

        with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
            loss = self._step()
        return {"loss": loss.item(), "saved_activation_bytes": sum(saved.values())}

    def infer(self) -> None:
        self.model.eval()
        tracking = torch.enable_grad() if self.scenario.technique == "tracked" else torch.inference_mode()
        with tracking:
            self.model(self.inputs)

    def allocate(self, nbytes: int) -> object:
        return torch.ones(nbytes // 4).to(self.device)

    def synchronize(self) -> None:
        if getattr(self, "device", None) is not None and self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def reset_peaks(self) -> None:
        if getattr(self, "device", None) is not None and self.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(self.device)

    def counters(self) -> dict[str, dict]:
        if getattr(self, "device", None) is None or self.device.type != "cuda":
            return {}  # torch offers no allocator statistics for the CPU
        if not allocators.counted(self.name, self.scenario.allocator):
            return {}  # without caching the statistics stay at zero: no figure beats a false one
        cuda = torch.cuda
        return {
            "allocated_peak": counter(cuda.max_memory_allocated(self.device), PEAK_SINCE_PHASE_START),
            "reserved_peak": counter(cuda.max_memory_reserved(self.device), PEAK_SINCE_PHASE_START),
            "allocated": counter(cuda.memory_allocated(self.device), AT_PHASE_END),
            "reserved": counter(cuda.memory_reserved(self.device), AT_PHASE_END),
        }

    def tensor_bytes(self) -> dict[str, int | None]:
        if not hasattr(self, "model"):
            return {}
        params = list(self.model.parameters())
        state = getattr(self, "optimizer", None)
        return {
            "weights": sum(_nbytes(p) for p in params),
            "gradients": sum(_nbytes(p.grad) for p in params if p.grad is not None),
            "optimizer_state": sum(_nbytes(value) for per_param in (state.state.values() if state else ())
                                   for value in per_param.values() if isinstance(value, torch.Tensor)),
            "inputs": _nbytes(self.inputs) + _nbytes(self.targets),
        }

    def framework_estimate(self) -> dict[str, object]:
        """torch.distributed._tools.mem_tracker on a FakeTensor replica: the peak by category, no memory used."""
        from torch._subclasses.fake_tensor import FakeTensorMode
        from torch.distributed._tools.mem_tracker import MemTracker

        with FakeTensorMode():
            replica = type(self)(self.scenario)
            replica.device = self.device
            replica.build()
            replica.compile()
            tracker = MemTracker()
            tracker.track_external(replica.model, replica.inputs, *([replica.optimizer] if self.scenario.kind == "train"
                                                                     else []))
            with tracker:
                if self.scenario.kind == "train":
                    replica._step()
                else:
                    with torch.no_grad():
                        replica.model(replica.inputs)
        peak = next(iter(tracker.get_tracker_snapshot("peak").values()))
        return {"mem_tracker": {"phase": "train_step_1" if self.scenario.kind == "train" else "inference",
                                "peak_bytes": int(peak["Total"]),
                                "by_category": {str(getattr(k, "value", k)): int(v) for k, v in peak.items()
                                                if k != "Total"}}}

    def is_oom(self, error: BaseException) -> bool:
        return (super().is_oom(error) or type(error).__name__ == "OutOfMemoryError"
                or "can't allocate memory" in str(error))

    def set_weights(self, weights: list[dict[str, np.ndarray]]) -> None:
        flattened_from = None
        weighted = iter(self._weighted())
        for step in self.spec.walk():
            if isinstance(step.layer, Flatten):
                flattened_from = step.input_shape if len(step.input_shape) == 3 else None
            if not step.params:
                continue
            _, module = next(weighted)
            kernel = weights[step.index]["kernel"]
            if isinstance(step.layer, Conv2D):
                kernel = kernel.transpose(3, 2, 0, 1)  # HWIO -> OIHW
            else:
                if flattened_from is not None:  # canonical rows are (h, w, c); torch flattens (c, h, w)
                    kernel = kernel.reshape(*flattened_from, -1).transpose(2, 0, 1, 3).reshape(kernel.shape)
                    flattened_from = None
                kernel = kernel.T
            with torch.no_grad():
                module.weight.copy_(torch.from_numpy(kernel.copy()))
                if module.bias is not None:
                    module.bias.copy_(torch.from_numpy(weights[step.index]["bias"]))

    def _to_torch(self, array: np.ndarray) -> torch.Tensor:
        tensor = torch.from_numpy(array).to(self.device)
        return tensor.permute(0, 3, 1, 2) if tensor.dim() == 4 else tensor

    def forward(self, batch: np.ndarray) -> np.ndarray:
        with torch.inference_mode():
            out = self.model.eval()(self._to_torch(batch))
        return (out.permute(0, 2, 3, 1) if out.dim() == 4 else out).cpu().numpy()

    def loss(self, batch: np.ndarray, target: np.ndarray) -> float:
        with torch.inference_mode():
            targets = self._to_torch(target)
            targets = targets.long() if self.spec.loss == "cross_entropy" else targets
            return self.loss_fn(self.model.eval()(self._to_torch(batch)), targets).item()
