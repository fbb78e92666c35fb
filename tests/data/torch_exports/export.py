"""How the ONNX files beside this script were made: one small net, exported by PyTorch's two exporters in the forms
a user runs, and torch's own counts of each net (`counts.json`: parameters, and floating-point buffers as statistics).
The importer's tests read the files (the tests' environment has no torch); run this again, with torch 2.13 and
onnxscript installed, to remake them: `python tests/data/torch_exports/export.py`.

The net has what the exporters treat specially: convs without bias, each before a batch norm (which an inference
export folds into the conv), a `torch.cat` of a one-tensor list (as DenseNet's first layer of a block), and a
conv whose bias is zeros, like the batch norms' offsets (the legacy exporter stores equal values once and reads
the copies through Identity nodes: parameters all the same, not a bias computed by the exporter). A
second net has torch's dropouts in training, which the default exporter writes as arithmetic when in place
(`dropouts.onnx`): torchvision's stochastic depth (one draw per example), an in-place nn.Dropout, and a plain one.
A third is torchvision's ConvNeXt in small (`pointwise.onnx`): Linear layers over an image's channels made last by
a permute, and its head: a global pool of a map strided channels-last, which the exporter writes with an
as_strided, then a channels-last layer norm before the flatten. A fourth has adaptive average pools whose size does
not divide the input's, which it writes as their decomposition (`adaptive.onnx`): a Transpose, a GatherND of the
windows, then Where, Gather, Add and Div where the windows are uneven, a ReduceMean where they are even. A fifth is
ShuffleNet v2's block (torchvision.models.shufflenetv2): a chunk of the channels, a branch, a concat and the channel
shuffle, by both exporters (`shuffle.onnx`, and `shuffle_legacy.onnx`, whose shuffle reads its sizes from `Shape`).
A sixth has the dense-prediction nets' layers, by the default exporter (`dense_prediction.onnx`): group norm (written
as an InstanceNormalization between Reshapes, then a Mul and an Add), instance norm with and without its scale,
PReLU, reflect and replicate padding, resizes, a transposed conv.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from torch import nn

HERE = Path(__file__).parent


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3, stride=2, padding=1, bias=False)
        self.stem_bn = nn.BatchNorm2d(8)
        self.conv = nn.Conv2d(8, 8, 3, padding=1, bias=False)
        self.conv_bn = nn.BatchNorm2d(8)
        self.project = nn.Conv2d(8, 8, 1)  # its bias zeros, as torchvision initializes many
        nn.init.zeros_(self.project.bias)
        self.pool = nn.MaxPool2d(2)
        self.head = nn.Linear(8, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.stem_bn(self.stem(x)))
        x = torch.relu(x + self.conv_bn(self.conv(torch.cat([x], 1))))
        x = self.pool(self.project(x))
        return self.head(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))


class Dropouts(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 3, 3, padding=1)
        self.in_place = nn.Dropout(0.25, inplace=True)
        self.plain = nn.Dropout(0.5)
        self.head = nn.Linear(3 * 8 * 8, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv(x)
        noise = torch.empty([y.shape[0], 1, 1, 1], dtype=y.dtype).bernoulli_(0.9).div_(0.9)  # torchvision's own
        x = self.in_place(torch.relu(x + y * noise))  # stochastic depth on a residual branch, as in MBConv
        return self.head(self.plain(torch.flatten(x, 1)))


class Pointwise(nn.Module):
    """A ConvNeXt block and head as torchvision writes them (torchvision.models.convnext)."""

    def __init__(self) -> None:
        super().__init__()
        self.stem_norm = nn.LayerNorm(4, eps=1e-6)  # torchvision's LayerNorm2d: its output strided channels-last
        self.depthwise = nn.Conv2d(4, 4, 3, padding=1, groups=4)
        self.norm = nn.LayerNorm(4, eps=1e-6)
        self.expand = nn.Linear(4, 16)
        self.project = nn.Linear(16, 4)
        self.layer_scale = nn.Parameter(torch.full((4, 1, 1), 0.5))
        self.head_norm = nn.LayerNorm(4, eps=1e-6)
        self.head = nn.Linear(4, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stem_norm(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)
        y = self.norm(self.depthwise(x).permute(0, 2, 3, 1))
        y = self.project(nn.functional.gelu(self.expand(y))).permute(0, 3, 1, 2)
        x = nn.functional.adaptive_avg_pool2d(x + self.layer_scale * y, 1)
        return self.head(torch.flatten(self.head_norm(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2), 1))


class Adaptive(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.uneven = nn.AdaptiveAvgPool2d((3, 6))  # 5 to 3 by windows of 2, 3 and 2 rows; 4 to 6 by 1 or 2 columns
        self.even = nn.AdaptiveAvgPool2d((2, 4))  # 3 to 2 by windows of 2 rows; 6 to 4 by 2 columns
        self.head = nn.Linear(4 * 2 * 4, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.flatten(self.even(self.uneven(torch.relu(self.conv(x)))), 1))


class Shuffle(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.branch = nn.Sequential(nn.Conv2d(4, 4, 1, bias=False), nn.BatchNorm2d(4), nn.ReLU(inplace=True))
        self.head = nn.Linear(8, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        kept, branched = x.chunk(2, dim=1)
        x = torch.cat((kept, self.branch(branched)), dim=1)
        batch, channels, height, width = x.size()
        x = x.view(batch, 2, channels // 2, height, width).transpose(1, 2).contiguous().view(batch, -1, height, width)
        return self.head(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))


class DensePrediction(nn.Module):
    """The segmentation and medical nets' layers: a pixel_unshuffle (space-to-depth), reflect and replicate padding
    (timm's blur pools), group norm in two groups and in one (PoolFormer's), instance norm without its own scale
    (torch's default, MONAI's) beside one with it, whose ones and zeros the exporter's optimizer stores as one
    initializer, PReLU per channel and shared (MONAI's default), resizes to a size with the corners aligned
    (DeepLabV3+'s) and by a factor that is no integer, and a grouped transposed conv (a decoder's upsampling)."""

    def __init__(self) -> None:
        super().__init__()
        self.reflect = nn.ReflectionPad2d((1, 2, 0, 1))
        self.conv = nn.Conv2d(12, 8, 3)
        self.group = nn.GroupNorm(2, 8)
        self.prelu = nn.PReLU(8)
        self.replicate = nn.ReplicationPad2d(1)
        self.conv2 = nn.Conv2d(8, 8, 3)
        self.instance = nn.InstanceNorm2d(8)
        self.instance_affine = nn.InstanceNorm2d(8, affine=True)
        self.prelu_shared = nn.PReLU()
        self.whole = nn.GroupNorm(1, 8)
        self.up = nn.ConvTranspose2d(8, 6, 3, 2, padding=1, output_padding=1, groups=2)
        self.head = nn.Linear(6, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.prelu(self.group(self.conv(self.reflect(nn.functional.pixel_unshuffle(x, 2)))))
        x = self.prelu_shared(self.instance_affine(self.instance(self.conv2(self.replicate(x)))))
        x = nn.functional.interpolate(self.whole(x), size=(7, 9), mode="bilinear", align_corners=True)
        x = self.up(nn.functional.interpolate(x, scale_factor=1.5))  # nearest, by a factor that is no integer
        return self.head(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))


class Pyramid(nn.Module):
    """Several outputs, as torchvision's FPN backbone and a detection head in train() return them: two levels, the
    coarse one an output that the fine one reads too (upsampled and added to a lateral conv)."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3, padding=1)
        self.norm = nn.BatchNorm2d(8)
        self.down = nn.Conv2d(8, 8, 3, 2, padding=1)
        self.lateral = nn.Conv2d(8, 8, 1)
        self.head = nn.Conv2d(8, 4, 3, padding=1)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        fine = torch.relu(self.norm(self.stem(x)))
        coarse = self.down(fine)
        return self.head(self.lateral(fine) + nn.functional.interpolate(coarse, scale_factor=2.0)), coarse


def main() -> None:
    torch.manual_seed(0)
    net, image = Net(), torch.randn(2, 3, 16, 16)
    with torch.no_grad():  # running statistics away from 0 and 1, so that a batch norm left out would show
        for norm in (net.stem_bn, net.conv_bn):
            norm.running_mean.uniform_(-0.5, 0.5)
            norm.running_var.uniform_(0.5, 2.0)
    batch = {"input_names": ["image"], "dynamic_axes": {"image": {0: "N"}}, "external_data": False}
    torch.onnx.export(net.train(), (image,), HERE / "default.onnx", **batch)  # batch norms fused into the convs
    torch.onnx.export(net.train(), (image,), HERE / "default_unoptimized.onnx", optimize=False, **batch)
    torch.onnx.export(net.eval(), (image,), HERE / "legacy.onnx", dynamo=False, **batch)  # fused (TrainingMode.EVAL)
    torch.onnx.export(net.eval(), (image,), HERE / "legacy_preserve.onnx", dynamo=False,
                      training=torch.onnx.TrainingMode.PRESERVE, **batch)
    dropouts = Dropouts()
    torch.onnx.export(dropouts.train(), (torch.randn(2, 3, 8, 8),), HERE / "dropouts.onnx", optimize=False, **batch)
    pointwise = Pointwise()
    torch.onnx.export(pointwise.train(), (torch.randn(2, 4, 6, 6),), HERE / "pointwise.onnx", optimize=False, **batch)
    adaptive = Adaptive()
    torch.onnx.export(adaptive.train(), (torch.randn(2, 3, 5, 4),), HERE / "adaptive.onnx", optimize=False, **batch)
    shuffle, block = Shuffle(), torch.randn(2, 8, 6, 6)
    torch.onnx.export(shuffle.train(), (block,), HERE / "shuffle.onnx", optimize=False, **batch)
    torch.onnx.export(shuffle.eval(), (block,), HERE / "shuffle_legacy.onnx", dynamo=False,
                      training=torch.onnx.TrainingMode.PRESERVE, **batch)
    dense = DensePrediction()
    torch.onnx.export(dense.train(), (torch.randn(2, 3, 10, 10),), HERE / "dense_prediction.onnx", **batch)
    pyramid = Pyramid()
    torch.onnx.export(pyramid.train(), (torch.randn(2, 3, 8, 8),), HERE / "pyramid.onnx", optimize=False, **batch)
    counts = {type(each).__name__: {"parameters": sum(parameter.numel() for parameter in each.parameters()),
                                    "statistics": sum(buffer.numel() for buffer in each.buffers()
                                                      if buffer.is_floating_point())}
              for each in (net, dropouts, pointwise, adaptive, shuffle, dense, pyramid)}
    (HERE / "counts.json").write_text(json.dumps(counts) + "\n")  # torch's own, for the importer's to equal


if __name__ == "__main__":
    main()
