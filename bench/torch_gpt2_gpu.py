#!/usr/bin/env python3
"""PyTorch peer for bench/gpu.sh: nanoGPT's recipe on one GPU, the shape dtrun trains
(GPT-2 with learned positions, tied output layer, GELU tanh): F.scaled_dot_product_attention
(causal), bf16 autocast, fused AdamW with decay on matrices only, clipping at 1.0, random tokens.
Prints torch_gpu_steps.py's line: "MODE B T median_ms tokens_per_s peak_allocated_MiB peak_reserved_MiB".
usage: torch_gpt2_gpu.py eager|compile L NH C V T B STEPS [DEVICE]   (DEVICE: cuda, or cpu to try it)"""
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch_gpu_steps import train


class Block(nn.Module):
    def __init__(self, C, NH):
        super().__init__()
        self.NH = NH
        self.ln_1, self.ln_2 = nn.LayerNorm(C), nn.LayerNorm(C)
        self.c_attn, self.c_proj = nn.Linear(C, 3 * C), nn.Linear(C, C)
        self.c_fc, self.mlp_proj = nn.Linear(C, 4 * C), nn.Linear(4 * C, C)

    def forward(self, x):
        b, t, C = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(C, dim=2)
        q, k, v = (z.view(b, t, self.NH, C // self.NH).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).contiguous().view(b, t, C)
        x = x + self.c_proj(y)
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, L, NH, C, V, T):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(V, C), nn.Embedding(T, C)
        self.blocks = nn.ModuleList(Block(C, NH) for _ in range(L))
        self.ln_f = nn.LayerNorm(C)

    def forward(self, idx, targets):
        pos = torch.arange(idx.shape[1], device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for blk in self.blocks:
            x = blk(x)
        logits = self.ln_f(x) @ self.wte.weight.t()
        return F.cross_entropy(logits.float().view(-1, logits.shape[-1]), targets.reshape(-1))


def main():
    mode = sys.argv[1]
    L, NH, C, V, T, B, steps = (int(a) for a in sys.argv[2:9])
    dev = sys.argv[9] if len(sys.argv) > 9 else "cuda"
    torch.manual_seed(0)
    model = GPT(L, NH, C, V, T).to(dev)
    train(model, lambda n, p: p.dim() >= 2 and "wte" not in n and "wpe" not in n, mode, V, T, B, steps, dev)


if __name__ == "__main__":
    main()
