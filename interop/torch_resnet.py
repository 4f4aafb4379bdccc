"""interop/torch_resnet.py — the PyTorch side's ResNet-18/34/50: torchvision.models.resnet*
when torchvision is installed, else a plain torch.nn copy of it, so that the interop check
and bench/torch_reference.py run on a machine whose PyTorch came without torchvision.

The copy is faithful to torchvision (0.15 and later): the same modules registered in the same
order (hence the same state_dict keys, "layer2.0.downsample.0.weight", and the same order of
draws from the random generator), the same "ResNet v1.5" stride on the 3x3 convolution of a
Bottleneck, and the same initialisation (kaiming_normal_ fan_out for every convolution,
BatchNorm at weight 1 / bias 0, nn.Linear's default for fc, zero_init_residual off). So a
seeded model is the same model either way; check_torch_interop.py verifies that when it can.

The small-image stem (memgrad's ResNetOptions::small_image_stem, for 32x32 images): a 3x3
stride-1 first convolution and no max pool, the usual CIFAR change to torchvision's model.
"""
import torch
from torch import nn

BLOCKS_PER_LAYER = {"resnet18": ("basic", [2, 2, 2, 2]), "resnet34": ("basic", [3, 4, 6, 3]),
                    "resnet50": ("bottleneck", [3, 4, 6, 3])}


def conv3x3(in_planes, out_planes, stride=1):
    return nn.Conv2d(in_planes, out_planes, kernel_size=3, stride=stride, padding=1, bias=False)


def conv1x1(in_planes, out_planes, stride=1):
    return nn.Conv2d(in_planes, out_planes, kernel_size=1, stride=stride, bias=False)


class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, in_planes, planes, stride=1, downsample=None):
        super().__init__()
        self.conv1 = conv3x3(in_planes, planes, stride)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = conv3x3(planes, planes)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = downsample
        self.stride = stride

    def forward(self, x):
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        # NOTE: torchvision's in-place add, which spares a block-sized buffer: the same
        # memory as torchvision's model, for the benchmark's peak-memory comparison.
        out += x if self.downsample is None else self.downsample(x)
        return self.relu(out)


class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, in_planes, planes, stride=1, downsample=None):
        super().__init__()
        self.conv1 = conv1x1(in_planes, planes)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = conv3x3(planes, planes, stride)
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv3 = conv1x1(planes, planes * self.expansion)
        self.bn3 = nn.BatchNorm2d(planes * self.expansion)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = downsample
        self.stride = stride

    def forward(self, x):
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        out += x if self.downsample is None else self.downsample(x)
        return self.relu(out)


class ResNet(nn.Module):
    def __init__(self, block, layers, num_classes=1000):
        super().__init__()
        self.in_planes = 64
        self.conv1 = nn.Conv2d(3, 64, kernel_size=7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
        self.layer1 = self._make_layer(block, 64, layers[0])
        self.layer2 = self._make_layer(block, 128, layers[1], stride=2)
        self.layer3 = self._make_layer(block, 256, layers[2], stride=2)
        self.layer4 = self._make_layer(block, 512, layers[3], stride=2)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(512 * block.expansion, num_classes)
        for module in self.modules():
            if isinstance(module, nn.Conv2d):
                nn.init.kaiming_normal_(module.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(module, nn.BatchNorm2d):
                nn.init.constant_(module.weight, 1)
                nn.init.constant_(module.bias, 0)

    def _make_layer(self, block, planes, blocks, stride=1):
        # NOTE: the shortcut is built before the block, as torchvision does, so that the
        # random draws of the constructors come in the same order.
        downsample = None
        if stride != 1 or self.in_planes != planes * block.expansion:
            downsample = nn.Sequential(conv1x1(self.in_planes, planes * block.expansion, stride),
                                       nn.BatchNorm2d(planes * block.expansion))
        layers = [block(self.in_planes, planes, stride, downsample)]
        self.in_planes = planes * block.expansion
        layers += [block(self.in_planes, planes) for _ in range(1, blocks)]
        return nn.Sequential(*layers)

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def plain_resnet(arch, num_classes=1000):
    kind, layers = BLOCKS_PER_LAYER[arch]
    return ResNet(BasicBlock if kind == "basic" else Bottleneck, layers, num_classes)


def torchvision_available():
    try:
        import torchvision  # noqa: F401
        return True
    except ImportError:
        return False


def build_resnet(arch, num_classes=1000, small_image_stem=False, source="auto"):
    """(model, source name). source: "torchvision", "plain" (this file's copy) or "auto"
    (torchvision when importable). Draws its initial values from torch's global generator."""
    if arch not in BLOCKS_PER_LAYER:
        raise ValueError(f"unknown arch {arch!r}; choose one of {sorted(BLOCKS_PER_LAYER)}")
    if source == "auto":
        source = "torchvision" if torchvision_available() else "plain"
    if source == "torchvision":
        import torchvision
        model = getattr(torchvision.models, arch)(weights=None, num_classes=num_classes)
        name = f"torchvision {torchvision.__version__}"
    else:
        model = plain_resnet(arch, num_classes)
        name = "plain torch.nn (interop/torch_resnet.py)"
    if small_image_stem:
        # Assigning to an existing name keeps its place in the state_dict's order.
        model.conv1 = conv3x3(3, 64)
        nn.init.kaiming_normal_(model.conv1.weight, mode="fan_out", nonlinearity="relu")
        model.maxpool = nn.Identity()
    return model, name
