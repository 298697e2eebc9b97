#!/usr/bin/env python3
"""PyTorch peer for bench/gpu.sh's Llama shapes: the Llama a user trains with plain PyTorch on one
GPU (torchtitan's and Hugging Face's arithmetic, written out): pre-RMSNorm blocks (F.rms_norm where
PyTorch has it), rotary positions in HF's rotate_half layout, grouped-query attention through
F.scaled_dot_product_attention (causal, enable_gqa: no repeated key/value heads), SwiGLU, no biases,
the LM head tied to the embedding or not; bf16 autocast, fused AdamW with decay on matrices only,
clipping at 1.0, random tokens. Rotary frequencies are unscaled (Llama 3.2's scaling changes the
table's values, not the work).
Prints torch_gpu_steps.py's line: "MODE B T median_ms tokens_per_s peak_allocated_MiB peak_reserved_MiB".
usage: torch_llama_gpu.py eager|compile L NH NKV C H V TIE T B STEPS [DEVICE]
  TIE 1 or 0; DEVICE cuda, or cpu to try it"""
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch_gpu_steps import train


def rms_norm(x, weight, eps):
    if hasattr(F, "rms_norm"):
        return F.rms_norm(x, (x.shape[-1],), weight, eps)
    xf = x.float()
    return weight * (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype)


def sdpa(q, k, v, n_rep):
    """causal attention, key/value head h // n_rep for query head h"""
    if hasattr(F, "scaled_dot_product_attention"):
        gqa = {"enable_gqa": True} if n_rep > 1 else {}
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, **gqa)
    # PyTorch before 2.0 (Debian's CPU build), to try the script: the arithmetic written out
    k, v = k.repeat_interleave(n_rep, dim=1), v.repeat_interleave(n_rep, dim=1)
    t = q.shape[-2]
    att = (q @ k.transpose(-2, -1)) / q.shape[-1] ** 0.5
    att = att.masked_fill(~torch.ones(t, t, dtype=torch.bool, device=q.device).tril(), float("-inf"))
    return F.softmax(att.float(), dim=-1).to(q.dtype) @ v


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


class Block(nn.Module):
    def __init__(self, C, NH, NKV, H, eps):
        super().__init__()
        self.NH, self.NKV, self.hs, self.eps = NH, NKV, C // NH, eps
        self.attn_norm, self.mlp_norm = nn.Parameter(torch.ones(C)), nn.Parameter(torch.ones(C))
        self.q_proj = nn.Linear(C, NH * self.hs, bias=False)
        self.k_proj = nn.Linear(C, NKV * self.hs, bias=False)
        self.v_proj = nn.Linear(C, NKV * self.hs, bias=False)
        self.o_proj = nn.Linear(NH * self.hs, C, bias=False)
        self.gate_proj, self.up_proj = nn.Linear(C, H, bias=False), nn.Linear(C, H, bias=False)
        self.down_proj = nn.Linear(H, C, bias=False)

    def attention(self, x, cos, sin):
        b, t, _ = x.shape
        q = self.q_proj(x).view(b, t, self.NH, self.hs).transpose(1, 2)
        k = self.k_proj(x).view(b, t, self.NKV, self.hs).transpose(1, 2)
        v = self.v_proj(x).view(b, t, self.NKV, self.hs).transpose(1, 2)
        q, k = q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin
        y = sdpa(q, k, v, self.NH // self.NKV)
        return self.o_proj(y.transpose(1, 2).contiguous().view(b, t, self.NH * self.hs))

    def forward(self, x, cos, sin):
        x = x + self.attention(rms_norm(x, self.attn_norm, self.eps), cos, sin)
        h = rms_norm(x, self.mlp_norm, self.eps)
        return x + self.down_proj(F.silu(self.gate_proj(h)) * self.up_proj(h))


class Llama(nn.Module):
    def __init__(self, L, NH, NKV, C, H, V, tie, T, theta=500000.0, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.embed = nn.Embedding(V, C)
        self.blocks = nn.ModuleList(Block(C, NH, NKV, H, eps) for _ in range(L))
        self.norm = nn.Parameter(torch.ones(C))
        self.head = None if tie else nn.Linear(C, V, bias=False)
        hs = C // NH
        freqs = torch.outer(torch.arange(T).float(), 1.0 / theta ** (torch.arange(0, hs, 2).float() / hs))
        emb = torch.cat((freqs, freqs), dim=-1)
        self.register_buffer("cos", emb.cos(), persistent=False)
        self.register_buffer("sin", emb.sin(), persistent=False)

    def forward(self, idx, targets):
        x = self.embed(idx)
        for blk in self.blocks:
            x = blk(x, self.cos, self.sin)
        x = rms_norm(x, self.norm, self.eps)
        logits = x @ (self.embed.weight if self.head is None else self.head.weight).t()
        return F.cross_entropy(logits.float().view(-1, logits.shape[-1]), targets.reshape(-1))


def main():
    mode = sys.argv[1]
    L, NH, NKV, C, H, V, tie, T, B, steps = (int(a) for a in sys.argv[2:12])
    dev = sys.argv[12] if len(sys.argv) > 12 else "cuda"
    torch.manual_seed(0)
    model = Llama(L, NH, NKV, C, H, V, bool(tie), T).to(dev)
    train(model, lambda n, p: p.dim() >= 2 and n != "embed.weight", mode, V, T, B, steps, dev)


if __name__ == "__main__":
    main()
