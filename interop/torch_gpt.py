"""interop/torch_gpt.py — the PyTorch side's GPT-2: a plain torch.nn model laid out as
nanoGPT's (Karpathy's model.py), under memgrad's parameter names (nn/gpt.h), so that a
state_dict moves between the two with load_state_dict(strict=True):

  transformer.wte.weight (vocab, C)   transformer.wpe.weight (block, C)
  transformer.h.<i>.ln_1.{weight,bias}        LayerNorm, eps 1e-5
  transformer.h.<i>.attn.c_attn.{weight,bias} nn.Linear (3C, C): q, k, v in that order
  transformer.h.<i>.attn.c_proj.{weight,bias} nn.Linear (C, C)
  transformer.h.<i>.ln_2.{weight,bias}
  transformer.h.<i>.mlp.c_fc.{weight,bias}    nn.Linear (4C, C), then GELU's tanh form
  transformer.h.<i>.mlp.c_proj.{weight,bias}  nn.Linear (C, 4C)
  transformer.ln_f.{weight,bias}

Linear weights are nn.Linear's (out, in), as in nanoGPT and memgrad; Hugging Face's GPT-2
files hold them transposed (a Conv1D layer). The language-model head is tied to the token
table and is not a module: nanoGPT's `lm_head = nn.Linear(...)` sharing wte's weight would
put an extra "lm_head.weight" key into torch's state_dict, which memgrad (and Hugging Face's
safetensors files) do not store. Attention is F.scaled_dot_product_attention with
is_causal=True. Dropout (GPTConfig.dropout, 0 by default) sits where memgrad's GPT has it:
after the embeddings, on the attention weights, after each residual branch; in evaluation
mode, as the interop check runs, there is none. The model is shared by the interop check,
bench/torch_reference.py --model gpt2 and bench/gpt_loss_reference.py.

Initialisation is nanoGPT's (memgrad's too): Linear and Embedding weights N(0, 0.02), the
residual projections (attn.c_proj, mlp.c_proj) N(0, 0.02 / sqrt(2 n_layer)), biases 0,
LayerNorm weight 1 and bias 0, drawn from torch's global generator.
"""
import math
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F


@dataclass
class GPTConfig:
    n_layer: int = 12
    n_head: int = 12
    n_embd: int = 768
    vocab_size: int = 50257
    block_size: int = 1024
    bias: bool = True
    layer_norm_eps: float = 1e-5
    dropout: float = 0.0


# OpenAI's GPT-2 sizes (memgrad's GPTOptions::gpt2(), gpt2_medium(), gpt2_large(), gpt2_xl()).
PRESETS = {"gpt2": GPTConfig(),
           "gpt2-medium": GPTConfig(n_layer=24, n_head=16, n_embd=1024),
           "gpt2-large": GPTConfig(n_layer=36, n_head=20, n_embd=1280),
           "gpt2-xl": GPTConfig(n_layer=48, n_head=25, n_embd=1600)}


class CausalSelfAttention(nn.Module):
    def __init__(self, config):
        super().__init__()
        if config.n_embd % config.n_head != 0:
            raise ValueError(f"n_embd {config.n_embd} is not a multiple of n_head {config.n_head}")
        self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd, bias=config.bias)
        self.c_proj = nn.Linear(config.n_embd, config.n_embd, bias=config.bias)
        self.resid_dropout = nn.Dropout(config.dropout)
        self.n_head = config.n_head
        self.dropout = config.dropout

    def forward(self, x):
        batch, steps, channels = x.shape
        q, k, v = self.c_attn(x).split(channels, dim=2)  # (B, T, C) each

        def heads(t):  # (B, T, C) -> (B, H, T, D)
            return t.view(batch, steps, self.n_head, channels // self.n_head).transpose(1, 2)

        y = F.scaled_dot_product_attention(heads(q), heads(k), heads(v), is_causal=True,
                                           dropout_p=self.dropout if self.training else 0.0)  # (B, H, T, D)
        return self.resid_dropout(self.c_proj(y.transpose(1, 2).contiguous().view(batch, steps, channels)))


class MLP(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.c_fc = nn.Linear(config.n_embd, 4 * config.n_embd, bias=config.bias)
        self.c_proj = nn.Linear(4 * config.n_embd, config.n_embd, bias=config.bias)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x):
        return self.dropout(self.c_proj(F.gelu(self.c_fc(x), approximate="tanh")))


class Block(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.ln_1 = nn.LayerNorm(config.n_embd, eps=config.layer_norm_eps, bias=config.bias)
        self.attn = CausalSelfAttention(config)
        self.ln_2 = nn.LayerNorm(config.n_embd, eps=config.layer_norm_eps, bias=config.bias)
        self.mlp = MLP(config)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(config.vocab_size, config.n_embd),
            wpe=nn.Embedding(config.block_size, config.n_embd),
            drop=nn.Dropout(config.dropout),
            h=nn.ModuleList([Block(config) for _ in range(config.n_layer)]),
            ln_f=nn.LayerNorm(config.n_embd, eps=config.layer_norm_eps, bias=config.bias),
        ))
        self.apply(self._init_weights)
        residual_std = 0.02 / math.sqrt(2 * config.n_layer)
        for name, parameter in self.named_parameters():
            if name.endswith("c_proj.weight"):
                nn.init.normal_(parameter, mean=0.0, std=residual_std)

    @staticmethod
    def _init_weights(module):
        if isinstance(module, nn.Linear):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def forward(self, tokens):
        """(B, T) int64 token ids -> logits (B, T, vocab_size)."""
        steps = tokens.shape[1]
        if steps > self.config.block_size:
            raise ValueError(f"T={steps} tokens, but block_size is {self.config.block_size}")
        positions = torch.arange(steps, device=tokens.device)
        x = self.transformer.drop(self.transformer.wte(tokens) + self.transformer.wpe(positions))
        for block in self.transformer.h:
            x = block(x)
        x = self.transformer.ln_f(x)
        return F.linear(x, self.transformer.wte.weight)  # the tied head


def randomise_norms_and_biases(model, generator):
    """Makes every LayerNorm weight 1 + N(0, 0.1^2) and every bias N(0, 0.02^2): nanoGPT's
    initial 1s and 0s would let a checkpoint that swapped or dropped them go unnoticed."""
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if name.endswith(".bias"):
                parameter.copy_(0.02 * torch.randn(parameter.shape, generator=generator))
            elif parameter.dim() == 1:
                parameter.copy_(1 + 0.1 * torch.randn(parameter.shape, generator=generator))
