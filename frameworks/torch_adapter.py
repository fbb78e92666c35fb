"""PyTorch: an eager module running the spec's graph (frameworks.graph) in channels-first layout.

The canonical layout is channels-last, so TensorFlow-style 'same' padding that is not
symmetric gets an explicit ZeroPad2d (an extra activation copy, as a torch user would write
it), and the dense layer after a flatten has its rows permuted when canonical weights load.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import math
import operator
from collections.abc import Sequence
from typing import TYPE_CHECKING

from frameworks import graph
from frameworks.adapter import Adapter, init_bound, listed
from models import allocator_modes, techniques
from models.record import AT_PHASE_END, PEAK_SINCE_PHASE_START, counter
from models.scenario import OPTIMIZER_SETTINGS
from models.spec import (
    ELU,
    GELU,
    AdaptiveAvgPool2D,
    Add,
    AvgPool2D,
    BatchNorm,
    ChannelShuffle,
    ChannelSlice,
    Concat,
    Conv2D,
    ConvTranspose2D,
    Crop2D,
    Dense,
    Dropout,
    Flatten,
    GlobalAvgPool,
    GroupNorm,
    HardSigmoid,
    HardSwish,
    InstanceNorm,
    LayerNorm,
    LayerScale,
    LayerShapes,
    LeakyReLU,
    MaxPool2D,
    Mish,
    ModelSpec,
    Multiply,
    Normalize,
    Pad2D,
    PReLU,
    ReLU,
    ReLU6,
    Rescale,
    Reshape,
    Resize2D,
    Sigmoid,
    SiLU,
    Softplus,
    SpaceToDepth,
    Subtract,
    Upsample2D,
    ZeroPad2D,
)

if TYPE_CHECKING:
    from collections.abc import Callable

    import numpy as np
    import torch

# batch norm's and layer norm's weights by the spec's names
NORM_WEIGHTS = {"scale": "weight", "offset": "bias", "mean": "running_mean", "variance": "running_var"}


def _channels_first(shape: tuple[int, ...]) -> tuple[int, ...]:
    return (shape[0], shape[-1], *shape[1:-1]) if len(shape) == 4 else shape


def _graph_net(spec: ModelSpec, modules: list[torch.nn.Module], technique: str) -> torch.nn.Module:
    """The spec's graph as one module: a module per layer, values dropped after their last reader, and the runs a
    technique recomputes under torch.utils.checkpoint (non-reentrant, as the torch docs recommend)."""
    import torch.utils.checkpoint

    class GraphNet(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.layers = torch.nn.ModuleList(modules)
            self.stages = graph.stages(spec, technique)

        def call(self, index: int, inputs: list[torch.Tensor]) -> torch.Tensor:
            return self.layers[index](*inputs)

        def recompute(self, stage: graph.Stage, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
            def body(*tensors: torch.Tensor) -> tuple[torch.Tensor, ...]:
                return tuple(graph.run_inside(spec, stage, list(tensors), self.call))

            return list(torch.utils.checkpoint.checkpoint(body, *inputs, use_reentrant=False))

        def forward(self, inputs: torch.Tensor) -> torch.Tensor | tuple[torch.Tensor, ...]:
            """The output, or a tuple of them where the spec has several (as torchvision's GoogLeNet trains)."""
            outputs = graph.run_stages(spec, self.stages, inputs, self.call, self.recompute)
            return outputs[0] if len(outputs) == 1 else tuple(outputs)

    return GraphNet()


def _merge(kind: str) -> torch.nn.Module:
    """add, multiply, subtract and concat as modules of several inputs (channels are torch's axis 1; a multiply's
    axes of 1 broadcast as they do channels-last)."""

    class Merge(torch.nn.Module):
        def forward(self, *inputs: torch.Tensor) -> torch.Tensor:
            if kind == "concat":
                return torch.cat(inputs, dim=1)
            if kind == "subtract":
                return inputs[0] - inputs[1]
            total = inputs[0]
            for tensor in inputs[1:]:
                total = total * tensor if kind == "multiply" else total + tensor
            return total

    return Merge()


def _global_avg_pool(keepdims: bool) -> torch.nn.Module:
    """The mean over H and W: its backward needs only the shape, so it keeps nothing (AdaptiveAvgPool2d keeps its
    input)."""

    class GlobalAvgPool(torch.nn.Module):
        def forward(self, inputs: torch.Tensor) -> torch.Tensor:
            return inputs.mean((2, 3), keepdim=keepdims)

    return GlobalAvgPool()


def _layer_norm(channels: int, epsilon: float, device: torch.device) -> torch.nn.Module:
    """LayerNorm over the channels, which are torch's axis 1 in an image: moved last and back (timm's LayerNorm2d)."""

    class ChannelLayerNorm(torch.nn.LayerNorm):
        def forward(self, inputs: torch.Tensor) -> torch.Tensor:
            if inputs.dim() == 2:
                return super().forward(inputs)
            return super().forward(inputs.movedim(1, -1)).movedim(-1, 1)

    return ChannelLayerNorm(channels, eps=epsilon, device=device)


def _conv_transpose(layer: ConvTranspose2D, channels: int, device: torch.device) -> torch.nn.Module:
    """torch's ConvTranspose2d of the spec's cut: its padding the pixels cut before, its output_padding those cut
    fewer after; where more are cut after (Keras's 'same' of an odd kernel less stride), they are sliced off."""
    padding = tuple(before for before, _ in layer.cut)
    extra = tuple(max(before - after, 0) for before, after in layer.cut)
    rows, columns = (max(after - before, 0) for before, after in layer.cut)

    class CroppedConvTranspose(torch.nn.ConvTranspose2d):
        def forward(self, inputs: torch.Tensor) -> torch.Tensor:
            out = super().forward(inputs)
            return out[..., :out.shape[2] - rows, :out.shape[3] - columns]

    built = CroppedConvTranspose if rows or columns else torch.nn.ConvTranspose2d
    return built(channels, layer.filters, layer.kernel_size, layer.stride, padding, extra, layer.groups, layer.bias,
                 device=device)


def _space_to_depth(layer: SpaceToDepth) -> torch.nn.Module:
    """torch's PixelUnshuffle (channel-major), or ONNX's SpaceToDepth (block-major): (N, C, H / b, b, W / b, b) with
    the tile's axes before the channel's."""
    if layer.order == "channel_major":
        return torch.nn.PixelUnshuffle(layer.block)

    class BlockMajor(torch.nn.Module):
        def forward(self, inputs: torch.Tensor) -> torch.Tensor:
            n, c, h, w, b = *inputs.shape, layer.block
            tiles = inputs.reshape(n, c, h // b, b, w // b, b).permute(0, 3, 5, 1, 2, 4)
            return tiles.reshape(n, c * b * b, h // b, w // b)

    return BlockMajor()


def _layer_scale(channels: int, device: torch.device) -> torch.nn.Module:
    """x times a learned scale per channel, torch's axis 1 in an image (torchvision's ConvNeXt holds it (C, 1, 1),
    timm's LayerScale2d views it so); it starts at 1, as a norm's scale does."""

    class ChannelScale(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.scale = torch.nn.Parameter(torch.ones(channels, device=device))

        def forward(self, inputs: torch.Tensor) -> torch.Tensor:
            return inputs * (self.scale.view(-1, 1, 1) if inputs.dim() == 4 else self.scale)

    return ChannelScale()


def _normalize(layer: Normalize, shape: tuple[int, ...], device: torch.device) -> torch.nn.Module:
    """Keras's Normalization: fixed per-channel mean and variance (and the count its adapt() saw), buffers that no
    step updates, so they count as statistics as batch norm's do; or the spec's constants, which are no state."""
    channels = (shape[-1], *(1,) * (len(shape) - 1))  # broadcast along torch's channel axis

    class FixedNormalize(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            if layer.mean:
                self.mean = torch.tensor(layer.mean, device=device)
                self.variance = torch.tensor(layer.variance, device=device)
                return
            self.register_buffer("mean", torch.zeros(shape[-1], device=device))
            self.register_buffer("variance", torch.ones(shape[-1], device=device))
            self.register_buffer("count", torch.zeros((), device=device))

        def forward(self, inputs: torch.Tensor) -> torch.Tensor:
            # the constants stay float32 where the net is cast: a buffer follows the net, the input's type both
            deviation = self.variance.sqrt().clamp(min=Normalize.least_deviation).view(channels).to(inputs.dtype)
            return (inputs - self.mean.view(channels).to(inputs.dtype)) / deviation

    return FixedNormalize()


def _reshape(shape: tuple[int, ...]) -> torch.nn.Module:
    """The spec's reshape reads channels-last: an image goes channels-last first, and an image result back."""

    class Reshape(torch.nn.Module):
        def forward(self, inputs: torch.Tensor) -> torch.Tensor:
            out = (inputs.permute(0, 2, 3, 1) if inputs.dim() == 4 else inputs).reshape(inputs.shape[0], *shape)
            return out.permute(0, 3, 1, 2) if out.dim() == 4 else out

    return Reshape()


def _crop(layer: Crop2D) -> torch.nn.Module:
    """The image's sides sliced off, a view (torch has no cropping module; ZeroPad2d's negative padding copies)."""

    class Crop(torch.nn.Module):
        def forward(self, inputs: torch.Tensor) -> torch.Tensor:
            height, width = inputs.shape[2:]
            return inputs[:, :, layer.top:height - layer.bottom, layer.left:width - layer.right]

    return Crop()


def _channel_slice(layer: ChannelSlice) -> torch.nn.Module:
    """Channels start to stop, a view (torch.chunk's parts are views too)."""

    class ChannelSlice(torch.nn.Module):
        def forward(self, inputs: torch.Tensor) -> torch.Tensor:
            return inputs[:, layer.start:layer.stop]

    return ChannelSlice()


def _channel_shuffle(groups: int) -> torch.nn.Module:
    """torchvision's channel_shuffle: a view as (N, groups, C / groups, H, W), transposed, copied contiguous and
    viewed as (N, C, H, W). Always a copy (its .contiguous() is none where groups is 1 or C, the shuffle then the
    identity), so an in-place ReLU after it never writes the tensor it read."""

    class ChannelShuffle(torch.nn.Module):
        def forward(self, inputs: torch.Tensor) -> torch.Tensor:
            n, c, h, w = inputs.shape
            shuffled = inputs.view(n, groups, c // groups, h, w).transpose(1, 2)
            return shuffled.clone(memory_format=torch.contiguous_format).view(n, c, h, w)

    return ChannelShuffle()


def _rescale(scale: float, offset: float) -> torch.nn.Module:
    """x * scale + offset with constants, as Keras's Rescaling (torch has no such module)."""

    class Rescale(torch.nn.Module):
        def forward(self, inputs: torch.Tensor) -> torch.Tensor:
            return inputs * scale + offset

    return Rescale()


def _dropout(rate: float, per_example: bool) -> torch.nn.Module:
    """nn.Dropout, or one draw per example for all its values (torchvision's StochasticDepth in "row" mode, which
    torch itself lacks)."""
    if not per_example:
        return torch.nn.Dropout(rate)

    class ExampleDropout(torch.nn.Module):
        def forward(self, inputs: torch.Tensor) -> torch.Tensor:
            if not self.training or not rate:
                return inputs
            shape = (inputs.shape[0], *(1,) * (inputs.dim() - 1))
            keep = torch.empty(shape, dtype=inputs.dtype, device=inputs.device).bernoulli_(1 - rate)
            return inputs * keep.div_(1 - rate)

    return ExampleDropout()


def _flattened_image(walk: list[LayerShapes], source: int) -> tuple[int, ...] | None:
    """The image whose flatten a layer reads, through layers that keep the flat values' order (dropout, an
    activation, a normalization): torch flattens channels-first, so that layer's per-feature weights load permuted.
    None where the values are not a flattened image (a reshape orders them canonically)."""
    while source >= 0 and not isinstance(walk[source].layer, Flatten):
        step = walk[source]
        if len(step.inputs) != 1 or step.input_shape != step.output_shape or len(step.output_shape) != 1:
            return None
        source = step.inputs[0]
    return walk[source].input_shape if source >= 0 and len(walk[source].input_shape) == 3 else None


def device_of(name: str) -> torch.device:
    """'cuda' as the indexed device 0 (the first CUDA_VISIBLE_DEVICES leaves): torch's per-device calls
    (set_per_process_memory_fraction, the memory statistics) refuse a CUDA device without an index."""
    import torch

    return torch.device("cuda", 0) if name == "cuda" else torch.device(name)


def _nbytes(tensor: torch.Tensor) -> int:
    return tensor.numel() * tensor.element_size()


def saved_activation_bytes(owned: list[torch.Tensor], run: Callable[[], object]) -> tuple[object, int]:
    """`run()`'s result and the bytes autograd's saved-tensor hooks saw it keep for a backward pass: each storage
    once, the `owned` tensors (weights, buffers, the batch) left out. Torch and Keras on torch measure with it."""
    import torch

    mine = {tensor.untyped_storage().data_ptr() for tensor in owned}
    saved: dict[int, int] = {}

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        storage = tensor.untyped_storage()
        if storage.data_ptr() not in mine:
            saved[storage.data_ptr()] = storage.nbytes()
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        result = run()
    return result, sum(saved.values())


def dynamo_graphs() -> dict[str, float]:
    """How many graphs Dynamo has compiled in this process so far (a recompilation adds one), the seconds
    compiling took so far (Dynamo's own clock; a phase's share is the difference from the phase before), and how
    many graphs came from a compile cache (Inductor's and AOTAutograd's): 0 where compiling was cold."""
    import torch._dynamo.utils

    counters = torch._dynamo.utils.counters
    return {"graphs_compiled": int(counters["stats"]["unique_graphs"]),
            "compile_seconds_so_far": round(torch._dynamo.utils.calculate_time_spent().get("total_wall_time", 0.0),
                                            3),
            "compile_cache_hits_so_far": int(counters["inductor"]["fxgraph_cache_hit"]
                                             + counters["aot_autograd"]["autograd_cache_hit"])}


# Beside the versions where PyTorch's CUDA build measures on the CPU (PyPI's Linux torch, where no CPU wheel was
# found): its figures are not the CPU build's, which the tox envs pin and the published CPU runs measured.
CUDA_BUILD_ON_CPU = "cuda_build_on_cpu"
CUDA_BUILD_COST = "its host figures hold CUDA's libraries, 65-93 % above the CPU build's (torch 2.13.0)"


class TorchAdapter(Adapter):
    name = "torch"

    def import_framework(self) -> dict[str, str]:
        """The versions and the build: `cuda` is the build's CUDA version, "None" for the CPU build."""
        global torch
        import torch

        versions = {"torch": torch.__version__, "cuda": str(torch.version.cuda)}
        if torch.version.cuda and self.scenario.device == "cpu":
            versions[CUDA_BUILD_ON_CPU] = CUDA_BUILD_COST
        return versions

    def init_device(self) -> str:
        self.device = device_of(self.scenario.device)
        if self.device.type == "cuda" and not torch.cuda.is_available():
            raise RuntimeError(f"torch {torch.__version__} sees no CUDA device")
        mode, value = allocator_modes.parse(self.name, self.scenario.allocator)
        if self.device.type == "cuda" and mode == "fraction":  # no variable for it: set before the first allocation
            torch.cuda.set_per_process_memory_fraction(float(value), self.device)
        torch.empty(1, device=self.device)  # the first allocation starts the CUDA context
        self.synchronize()
        if self.device.type == "cuda":
            return torch.cuda.get_device_name(self.device)
        return f"cpu ({torch.get_num_threads()} threads)"

    def _module(self, step: LayerShapes, in_place: bool) -> torch.nn.Module:
        """One spec layer as torch modules (a conv with uneven 'same' padding is a ZeroPad2d and the conv)."""
        nn, layer = torch.nn, step.layer
        if isinstance(layer, Conv2D):
            conv = nn.Conv2d(step.input_shape[2], layer.filters, layer.kernel_size, layer.stride, 0, layer.dilation,
                             bias=layer.bias, groups=layer.groups, device=self.device)
            conv.padding = layer.pixels or (0, 0)
            if layer.padding == "same":
                (top, bottom), (left, right) = layer.same_sides(step.input_shape)
                if (top, left) != (bottom, right):
                    return nn.Sequential(nn.ZeroPad2d((left, right, top, bottom)), conv)
                conv.padding = (top, left)
            return conv
        if isinstance(layer, ConvTranspose2D):
            return _conv_transpose(layer, step.input_shape[2], self.device)
        if isinstance(layer, BatchNorm):
            norm = nn.BatchNorm2d if len(step.input_shape) == 3 else nn.BatchNorm1d
            module = norm(step.input_shape[-1], eps=layer.epsilon, momentum=layer.momentum, device=self.device)
            for learned, attribute in ((layer.scale, "weight"), (layer.center, "bias")):
                if not learned:  # F.batch_norm takes a missing weight as 1, a missing bias as 0
                    module.register_parameter(attribute, None)
            return module
        if isinstance(layer, Dense):
            return nn.Linear(step.input_shape[0], layer.units, bias=layer.bias, device=self.device)
        simple = {
            MaxPool2D: lambda: nn.MaxPool2d(layer.pool, layer.step, layer.padding, ceil_mode=layer.ceil_mode),
            AvgPool2D: lambda: nn.AvgPool2d(layer.pool, layer.step, layer.padding, layer.ceil_mode,
                                            layer.count_include_pad),
            AdaptiveAvgPool2D: lambda: nn.AdaptiveAvgPool2d(layer.size),
            GlobalAvgPool: lambda: _global_avg_pool(layer.keepdims),
            Dropout: lambda: _dropout(layer.rate, layer.per_example),
            Flatten: nn.Flatten,
            ReLU: lambda: nn.ReLU(inplace=in_place),
            ReLU6: lambda: nn.ReLU6(inplace=in_place),
            SiLU: lambda: nn.SiLU(inplace=in_place),
            Sigmoid: nn.Sigmoid,
            HardSigmoid: nn.Hardsigmoid,
            HardSwish: nn.Hardswish,
            GELU: lambda: nn.GELU(approximate="tanh" if layer.approximate else "none"),
            LeakyReLU: lambda: nn.LeakyReLU(layer.negative_slope),
            ELU: lambda: nn.ELU(layer.alpha),
            Softplus: nn.Softplus,
            Mish: nn.Mish,
            LayerNorm: lambda: _layer_norm(step.input_shape[-1], layer.epsilon, self.device),
            LayerScale: lambda: _layer_scale(step.input_shape[-1], self.device),
            Rescale: lambda: _rescale(layer.scale, layer.offset),
            Normalize: lambda: _normalize(layer, step.input_shape, self.device),
            ZeroPad2D: lambda: nn.ZeroPad2d((layer.left, layer.right, layer.top, layer.bottom)),
            Pad2D: lambda: (nn.ReflectionPad2d if layer.mode == "reflect" else nn.ReplicationPad2d)(
                (layer.left, layer.right, layer.top, layer.bottom)),
            GroupNorm: lambda: nn.GroupNorm(layer.groups, step.input_shape[-1], layer.epsilon, layer.affine,
                                            device=self.device),
            InstanceNorm: lambda: nn.InstanceNorm2d(step.input_shape[-1], layer.epsilon, affine=layer.affine,
                                                    device=self.device),
            PReLU: lambda: nn.PReLU(1 if layer.shared else step.input_shape[-1], layer.start, device=self.device),
            Crop2D: lambda: _crop(layer),
            ChannelSlice: lambda: _channel_slice(layer),
            ChannelShuffle: lambda: _channel_shuffle(layer.groups),
            Upsample2D: lambda: nn.Upsample(scale_factor=layer.scale, mode=layer.interpolation,
                                            align_corners=False if layer.interpolation == "bilinear" else None),
            Reshape: lambda: _reshape(layer.shape),
            SpaceToDepth: lambda: _space_to_depth(layer),
            Resize2D: lambda: nn.Upsample(layer.size, layer.scale, layer.interpolation,
                                          layer.align_corners if layer.interpolation == "bilinear" else None),
            Add: lambda: _merge("add"),
            Multiply: lambda: _merge("multiply"),
            Concat: lambda: _merge("concat"),
            Subtract: lambda: _merge("subtract"),
        }
        return simple[type(layer)]()

    def _weighted(self) -> list[tuple[LayerShapes, torch.nn.Module]]:
        """(spec step, module) for every layer that has weights, in order (the conv of a padded pair)."""
        pairs = []
        for step, module in zip(self.spec.walk(), self.model.layers, strict=True):
            if step.params:
                pairs.append((step, module[-1] if isinstance(module, torch.nn.Sequential) else module))
        return pairs

    def build(self) -> None:
        torch.manual_seed(0)
        in_place = techniques.in_place(self.spec, self.scenario.technique)
        modules = [self._module(step, step.index in in_place) for step in self.spec.walk()]
        self.model = _graph_net(self.spec, modules, self.scenario.technique)
        with torch.no_grad():
            for step, module in self._weighted():
                if "kernel" not in step.params:
                    continue  # batch and layer norm (and layer scale) start at scale 1, offset 0 (mean 0, variance 1)
                bound = init_bound(step)
                module.weight.uniform_(-bound, bound)
                if module.bias is not None:
                    module.bias.zero_()
        self.inputs = torch.randn(_channels_first(self.input_shape), device=self.device)
        self.targets = tuple(torch.randint(classes, shape, device=self.device) if self.spec.loss == "cross_entropy"
                             else torch.randn(_channels_first(shape), device=self.device)
                             for classes, shape in zip(self.classes, self.target_shapes, strict=True))
        self.loss_fn = torch.nn.functional.mse_loss if self.spec.loss == "mse" else torch.nn.functional.cross_entropy

    def _loss(self, output: torch.Tensor | tuple[torch.Tensor, ...], targets: Sequence[torch.Tensor]) -> torch.Tensor:
        """The spec's loss of each output against its target, summed (equally weighted)."""
        return functools.reduce(operator.add, (self.loss_fn(out, target)
                                               for out, target in zip(listed(output), targets, strict=True)))

    def param_count(self) -> int:
        return sum(p.numel() for p in self.model.parameters())

    def _statistics_buffers(self) -> list[torch.Tensor]:
        """Batch norm's running mean and variance and normalize's fixed ones (and count); batch norm's int64
        num_batches_tracked counter is not a statistic (it matters only with momentum=None, which the spec never
        uses)."""
        return [buffer for buffer in self.model.buffers() if buffer.is_floating_point()]

    def statistics_count(self) -> int:
        return sum(buffer.numel() for buffer in self._statistics_buffers())

    def compile(self) -> dict[str, object]:
        mode = self.scenario.execution_mode
        notes = self._compile_model(mode) if mode != "eager" else {"mode": "eager"}
        if self.scenario.kind == "infer":
            self.model.eval()
            return notes | ({"what": "nothing to compile: eval mode set"} if mode == "eager" else {})
        settings = OPTIMIZER_SETTINGS[self.scenario.optimizer]
        self.scaler = (torch.amp.GradScaler(self.device.type, init_scale=techniques.LOSS_SCALE)
                       if self.scenario.technique == "fp16" else None)
        if self.scenario.optimizer in ("sgd", "momentum"):
            self.optimizer = torch.optim.SGD(self.model.parameters(), lr=settings["learning_rate"],
                                             momentum=settings["momentum"])
        else:
            self.optimizer = torch.optim.Adam(self.model.parameters(), lr=settings["learning_rate"],
                                              betas=(settings["beta_1"], settings["beta_2"]),
                                              eps=settings["epsilon"])
        self.model.train()
        return notes | {"what": "optimizer created; gradients and its state are allocated at the first step"
                        + ("" if mode == "eager" else "; the training graph compiles at that first step")}

    def _compile_model(self, mode: str) -> dict[str, object]:
        """torch.compile, then one forward pass in inference mode, so the inference graph is compiled here and the
        inference phase measures it steady; Dynamo compiles the training graph lazily, at train_step_1."""
        option = None if mode == "compile" else mode
        self.model = torch.compile(self.model, mode=option)
        self.model.eval()
        with torch.inference_mode():
            self.model(self.inputs)
        return {"mode": mode, "what": f"torch.compile(mode={option!r}) and the inference graph compiled by one"
                                      " forward pass on the batch", **dynamo_graphs()}

    def _precision(self) -> contextlib.AbstractContextManager:
        """torch.autocast for the mixed-precision techniques (the weights stay fp32)."""
        half = {"fp16": torch.float16, "bf16": torch.bfloat16}.get(self.scenario.technique)
        return torch.autocast(self.device.type, dtype=half) if half else contextlib.nullcontext()

    def _step(self) -> torch.Tensor:
        """zero_grad, forward and backward per micro-batch (one unless accumulating), then the update."""
        self.optimizer.zero_grad(set_to_none=True)
        micro = techniques.ACCUMULATION_STEPS if self.scenario.technique == "accumulate" else 1
        total = torch.zeros((), device=self.device)
        chunks = zip(*(target.chunk(micro) for target in self.targets), strict=True)
        for inputs, targets in zip(self.inputs.chunk(micro), chunks, strict=True):
            with self._precision():
                loss = self._loss(self.model(inputs), targets) / micro
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
        """One step; autograd's saved-tensor hooks measure what the forward keeps for the backward (eager only:
        a compiled graph keeps its own, out of the hooks' sight)."""
        scale = self.scaler.get_scale() if self.scaler else 0.0
        if self.scenario.execution_mode != "eager":
            notes = {"loss": self._step().item(), **dynamo_graphs()}
        else:
            loss, saved = saved_activation_bytes(
                [*self.model.parameters(), *self.model.buffers(), self.inputs, *self.targets], self._step)
            notes = {"loss": loss.item(), "saved_activation_bytes": saved}
        skipped = self.scaler is not None and self.scaler.get_scale() < scale  # it backs off where step() skipped
        return notes | ({"update_skipped": "GradScaler found inf or NaN gradients: no update, so no optimizer state"}
                        if skipped else {})

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
        if not allocator_modes.counted(self.name, self.scenario.allocator):
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
            "weights": sum(_nbytes(p) for p in params) + sum(_nbytes(b) for b in self._statistics_buffers()),
            "gradients": sum(_nbytes(p.grad) for p in params if p.grad is not None),
            "optimizer_state": sum(_nbytes(value) for per_param in (state.state.values() if state else ())
                                   for value in per_param.values() if isinstance(value, torch.Tensor)),
            "inputs": _nbytes(self.inputs) + sum(_nbytes(target) for target in self.targets),
        }

    def framework_estimate(self) -> dict[str, object]:
        """torch.distributed._tools.mem_tracker on a FakeTensor replica: the peak by category, no memory used. The
        replica runs eagerly (torch.compile cannot trace FakeTensors a second time): under a compiled mode this is
        the eager graph's figure, and the record says so."""
        from torch._subclasses.fake_tensor import FakeTensorMode
        from torch.distributed._tools.mem_tracker import MemTracker

        with FakeTensorMode():
            replica = type(self)(dataclasses.replace(self.scenario, execution="eager"))
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
                                "execution": "eager", "peak_bytes": int(peak["Total"]),
                                "by_category": {str(getattr(k, "value", k)): int(v) for k, v in peak.items()
                                                if k != "Total"}}}

    def is_oom(self, error: BaseException) -> bool:
        return (super().is_oom(error) or type(error).__name__ == "OutOfMemoryError"
                or "can't allocate memory" in str(error))

    def set_weights(self, weights: list[dict[str, np.ndarray]]) -> None:
        walk = self.spec.walk()
        for step, module in zip(walk, self.model.layers, strict=True):
            if not step.weights:
                continue
            given = {name: torch.from_numpy(value.copy()) for name, value in weights[step.index].items()}
            image = _flattened_image(walk, step.inputs[0])
            if image and not isinstance(step.layer, Dense):  # per feature: canonical (h, w, c) order, torch's (c, h, w)
                given = {name: value.reshape(image).permute(2, 0, 1).reshape(-1)
                         if value.dim() == 1 and value.numel() == math.prod(image) else value  # not a shared slope
                         for name, value in given.items()}
            if isinstance(step.layer, PReLU):
                targets = {"slope": module.weight}
            elif isinstance(step.layer, (BatchNorm, LayerNorm, GroupNorm, InstanceNorm)):  # torch's names; all but
                # batch norm have two
                targets = {name: getattr(module, attribute) for name, attribute in NORM_WEIGHTS.items()
                           if name in given}
            elif isinstance(step.layer, (Normalize, LayerScale)):  # their buffers and parameter have the spec's names
                targets = dict(module.named_buffers()) | dict(module.named_parameters())
            else:
                module = module[-1] if isinstance(module, torch.nn.Sequential) else module
                kernel = given["kernel"]
                if isinstance(step.layer, Conv2D):
                    kernel = kernel.permute(3, 2, 0, 1)  # HWIO -> OIHW
                elif isinstance(step.layer, ConvTranspose2D):
                    kernel = kernel.permute(3, 2, 0, 1)  # (kh, kw, out / groups, in) -> (in, out / groups, kh, kw)
                else:
                    if image:  # canonical rows are (h, w, c); torch flattens (c, h, w)
                        kernel = kernel.reshape(*image, -1).permute(2, 0, 1, 3).reshape(given["kernel"].shape)
                    kernel = kernel.T
                given["kernel"] = kernel
                targets = {"kernel": module.weight, "bias": module.bias}
            with torch.no_grad():
                for name, value in given.items():
                    targets[name].copy_(value)

    def _to_torch(self, array: np.ndarray) -> torch.Tensor:
        tensor = torch.from_numpy(array).to(self.device)
        return tensor.permute(0, 3, 1, 2) if tensor.dim() == 4 else tensor

    def evaluate(self, batch: np.ndarray, targets: list[np.ndarray], training: bool) -> tuple[list[np.ndarray], float]:
        with torch.no_grad():
            output = self.model.train(training)(self._to_torch(batch))
            given = [self._to_torch(target) for target in targets]
            loss = self._loss(output, [target.long() if self.spec.loss == "cross_entropy" else target
                                       for target in given]).item()
        return [(out.permute(0, 2, 3, 1) if out.dim() == 4 else out).cpu().numpy() for out in listed(output)], loss

    def statistics(self) -> list[dict[str, np.ndarray]]:
        """Batch norm's running statistics in canonical order (after a flatten, torch's features are (c, h, w))."""
        walk, found = self.spec.walk(), []
        for step, module in zip(walk, self.model.layers, strict=True):
            image = _flattened_image(walk, step.inputs[0]) if isinstance(step.layer, BatchNorm) else None
            found.append({name: (value.reshape(image[2], *image[:2]).permute(1, 2, 0).reshape(-1) if image else value)
                          .cpu().numpy() for name, value in (("mean", module.running_mean),
                                                             ("variance", module.running_var))}
                         if isinstance(step.layer, BatchNorm) else {})
        return found
