"""bench/torch_reference_models.py — what bench/torch_reference.py trains: the MLP and the
CNN of bench_train_step, the ResNets and GPT-2 (interop/torch_resnet.py,
interop/torch_gpt.py), their inputs' shapes, checkpointing, and each one's optimizer as
memgrad's benchmarks make it. Also imported by bench/gpt_loss_reference.py (gpt_optimizer).
"""
import os
import sys

import torch
import torch.utils.checkpoint

# The ResNet and GPT definitions are shared with the interop checks, which need the very
# same models.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "interop"))
import torch_gpt  # noqa: E402
import torch_resnet  # noqa: E402

IMAGE_SIZE = 28
PIXELS = IMAGE_SIZE * IMAGE_SIZE
CLASSES = 10
# (channels, height, width) of the input, classes, small-image stem — as examples/resnet/bench.cpp.
RESNET_SHAPES = {"resnet18": ((3, 32, 32), 10, True), "resnet50": ((3, 224, 224), 1000, False)}
# GPT-2's tokenizer's tokens, and the model's table padded to a multiple of 64 (as
# examples/gpt/bench.h's kBenchTokens and kBenchVocabulary).
GPT_TOKENS = 50257
GPT_VOCABULARY = 50304


def build_mlp():
    return torch.nn.Sequential(
        torch.nn.Linear(PIXELS, 512), torch.nn.ReLU(),
        torch.nn.Linear(512, 256), torch.nn.ReLU(),
        torch.nn.Linear(256, CLASSES))


def build_cnn():
    """memgrad's nn::MnistCnn (memgrad/nn/mnist_cnn.cpp) layer for layer: conv 1->32 3x3,
    ReLU, conv 32->64 3x3, ReLU, max-pool 2, dropout 0.25, flatten, fc 9216->128, ReLU,
    dropout 0.5, fc 128->10; logits out (no log_softmax: the loss is cross-entropy)."""
    pooled = (IMAGE_SIZE - 4) // 2
    return torch.nn.Sequential(
        torch.nn.Conv2d(1, 32, 3), torch.nn.ReLU(),
        torch.nn.Conv2d(32, 64, 3), torch.nn.ReLU(),
        torch.nn.MaxPool2d(2), torch.nn.Dropout(0.25), torch.nn.Flatten(1),
        torch.nn.Linear(64 * pooled * pooled, 128), torch.nn.ReLU(), torch.nn.Dropout(0.5),
        torch.nn.Linear(128, CLASSES))


def build_model(args):
    """(model on the CPU, its description, input shape without the batch, classes)."""
    if args.model == "mlp":
        return build_mlp(), "torch.nn.Sequential", (PIXELS,), CLASSES
    if args.model == "cnn":
        return build_cnn(), "torch.nn.Sequential", (1, IMAGE_SIZE, IMAGE_SIZE), CLASSES
    image, classes, small_image_stem = RESNET_SHAPES[args.model]
    model, source = torch_resnet.build_resnet(args.model, classes, small_image_stem)
    return model, source, image, classes


class Checkpointed(torch.nn.Module):
    """A segment whose activations are recomputed in backward: only its input is kept."""

    def __init__(self, segment):
        super().__init__()
        self.segment = segment

    def forward(self, x):
        return torch.utils.checkpoint.checkpoint(self.segment, x, use_reentrant=False)


def checkpoint_stages(model):
    """The stem and every residual block of layer1..layer4 checkpointed, each its own segment,
    as memgrad's ResNetOptions::checkpoint_stages."""
    stem = torch.nn.Sequential(model.conv1, model.bn1, model.relu, model.maxpool)
    model.conv1 = Checkpointed(stem)
    model.bn1 = model.relu = model.maxpool = torch.nn.Identity()
    for name in ("layer1", "layer2", "layer3", "layer4"):
        stage = getattr(model, name)
        setattr(model, name, torch.nn.Sequential(*(Checkpointed(block) for block in stage)))


def build_gpt(checkpoint, preset="gpt2"):
    """GPT-2 of `preset`'s sizes (124M by default) as `gpt --bench --preset` builds it
    (interop/torch_gpt.py), its token table padded to GPT_VOCABULARY; with `checkpoint`, each
    transformer block recomputed in backward."""
    sizes = torch_gpt.PRESETS[preset]
    model = torch_gpt.GPT(torch_gpt.GPTConfig(n_layer=sizes.n_layer, n_head=sizes.n_head, n_embd=sizes.n_embd,
                                              vocab_size=GPT_VOCABULARY))
    if checkpoint:
        model.transformer.h = torch.nn.ModuleList(Checkpointed(block) for block in model.transformer.h)
    return model


def make_optimizer(args, params):
    # Adam's step counters live on the host unless capturable, and a CUDA graph cannot
    # advance host state.
    capturable = {"capturable": True} if args.cuda_graph and args.optim in ("adam", "adamw") else {}
    if args.model in RESNET_SHAPES:
        # examples/resnet/bench.cpp's SGDOptions, field for field.
        return torch.optim.SGD(params, lr=args.lr or 0.1, momentum=0.9, weight_decay=5e-4, nesterov=True)
    if args.optim == "sgd":
        return torch.optim.SGD(params, lr=args.lr or 0.01, momentum=0.9)
    if args.optim == "adam":
        return torch.optim.Adam(params, lr=args.lr or 1e-3, **capturable)
    if args.optim == "adamw":
        return torch.optim.AdamW(params, lr=args.lr or 1e-3, **capturable)
    return torch.optim.Adagrad(params, lr=args.lr or 1e-2)


def gpt_optimizer(model, lr):
    """AdamW with the gpt example's groups and settings (examples/gpt/main.cpp,
    optim/param_groups.h): weight decay 0.1 on every parameter of two or more dimensions,
    none on the others; betas 0.9 / 0.99; the fused kernel on cuda (torch's CPU build may
    lack it)."""
    parameters = [p for p in model.parameters() if p.requires_grad]
    groups = [{"params": [p for p in parameters if p.dim() >= 2], "weight_decay": 0.1},
              {"params": [p for p in parameters if p.dim() < 2], "weight_decay": 0.0}]
    fused = next(iter(parameters)).device.type == "cuda"
    return torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.99), fused=fused)
