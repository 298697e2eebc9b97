#!/usr/bin/env python3
"""PyTorch peer for bench/gpu.sh: nanoGPT's recipe on one GPU, the shape dtrun trains
(GPT-2 with learned positions, tied output layer, GELU tanh): F.scaled_dot_product_attention
(causal), bf16 autocast, fused AdamW with decay on matrices only, clipping at 1.0, random tokens.
Prints one line: "MODE B T median_ms tokens_per_s peak_allocated_MiB peak_reserved_MiB".
usage: torch_gpt2_gpu.py eager|compile L NH C V T B STEPS [DEVICE]   (DEVICE: cuda, or cpu to try it)"""
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


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
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2 and "wte" not in n and "wpe" not in n]
    rest = [p for n, p in model.named_parameters() if not (p.dim() >= 2 and "wte" not in n and "wpe" not in n)]
    fused = {"fused": True} if dev == "cuda" else {}  # Debian's CPU torch predates the argument
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": rest, "weight_decay": 0.0}],
                            lr=3e-4, betas=(0.9, 0.95), eps=1e-8, **fused)
    step_model = torch.compile(model) if mode == "compile" else model
    sync = torch.cuda.synchronize if dev == "cuda" else (lambda: None)
    times = []
    for _ in range(steps):
        tokens = torch.randint(0, V, (B, T + 1), device=dev)
        sync()
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        with torch.autocast(device_type=dev, dtype=torch.bfloat16):
            loss = step_model(tokens[:, :-1], tokens[:, 1:])
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sync()
        times.append(time.perf_counter() - t0)
    ms = statistics.median(times[5:] if len(times) > 7 else times[1:]) * 1e3
    alloc = torch.cuda.max_memory_allocated() / 2**20 if dev == "cuda" else 0
    reserved = torch.cuda.max_memory_reserved() / 2**20 if dev == "cuda" else 0
    print(f"{mode} {B} {T} {ms:.3f} {B * T / ms * 1e3:.0f} {alloc:.0f} {reserved:.0f}")


if __name__ == "__main__":
    main()
