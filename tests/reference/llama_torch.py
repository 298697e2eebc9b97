"""Llama in PyTorch: Hugging Face transformers' LlamaForCausalLM arithmetic written out by
hand (transformers itself is not needed), the peer that make_llama_fixture.py checks
src/model/llama.c against. Pre-RMSNorm blocks, rotary positions in HF's rotate_half
layout, grouped-query attention (query head h reads key/value head h // (NH / NKV)),
SwiGLU MLP, no biases; the LM head is its own matrix or tied to the token embedding.
Parameters flatten in dtrun's order (see flat_order)."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class RMSNorm(nn.Module):
    """HF's LlamaRMSNorm: x * rsqrt(mean(x^2) + eps) in float32, times the weight (in
    float64 when the model is, for the float64 checks; HF would round it to float32)."""

    def __init__(self, C, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(C))

    def forward(self, x):
        dtype = x.dtype
        x = x.to(torch.promote_types(dtype, torch.float32))
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x.to(dtype)


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


def rope_cos_sin(T, hs, theta, dtype=torch.float32):
    """HF's LlamaRotaryEmbedding (default rope type): cos, sin of shape (T, hs), computed in
    float32 and cast to dtype (in float64 when dtype is, for the float64 checks)."""
    ct = torch.promote_types(dtype, torch.float32)
    inv_freq = 1.0 / (theta ** (torch.arange(0, hs, 2, dtype=torch.int64).to(ct) / hs))
    pos = torch.arange(T, dtype=ct)
    freqs = torch.outer(pos, inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos().to(dtype), emb.sin().to(dtype)


def apply_rope(x, cos, sin):
    """x (b, heads, t, hs); cos/sin (t, hs)."""
    return x * cos + rotate_half(x) * sin


def repeat_kv(x, n_rep):
    """(b, NKV, t, hs) -> (b, NKV * n_rep, t, hs), each kv head repeated n_rep times in a row."""
    b, nkv, t, hs = x.shape
    if n_rep == 1:
        return x
    return x[:, :, None, :, :].expand(b, nkv, n_rep, t, hs).reshape(b, nkv * n_rep, t, hs)


class Attention(nn.Module):
    def __init__(self, C, NH, NKV, theta):
        super().__init__()
        assert C % NH == 0 and NH % NKV == 0
        self.NH, self.NKV, self.hs, self.theta = NH, NKV, C // NH, theta
        assert self.hs % 2 == 0, "rotary needs an even head dim"
        self.q_proj = nn.Linear(C, NH * self.hs, bias=False)
        self.k_proj = nn.Linear(C, NKV * self.hs, bias=False)
        self.v_proj = nn.Linear(C, NKV * self.hs, bias=False)
        self.o_proj = nn.Linear(NH * self.hs, C, bias=False)

    def forward(self, x):
        b, t, _ = x.shape
        hs = self.hs
        q = self.q_proj(x).view(b, t, self.NH, hs).transpose(1, 2)
        k = self.k_proj(x).view(b, t, self.NKV, hs).transpose(1, 2)
        v = self.v_proj(x).view(b, t, self.NKV, hs).transpose(1, 2)
        cos, sin = rope_cos_sin(t, hs, self.theta, x.dtype)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        k, v = repeat_kv(k, self.NH // self.NKV), repeat_kv(v, self.NH // self.NKV)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(hs)
        mask = torch.tril(torch.ones(t, t, dtype=torch.bool))
        st = torch.promote_types(q.dtype, torch.float32)  # HF: softmax in float32 (float64 kept)
        att = F.softmax(att.masked_fill(~mask, float("-inf")), dim=-1, dtype=st).to(q.dtype)
        y = (att @ v).transpose(1, 2).contiguous().view(b, t, self.NH * hs)
        return self.o_proj(y)


class MLP(nn.Module):
    def __init__(self, C, H):
        super().__init__()
        self.gate_proj = nn.Linear(C, H, bias=False)
        self.up_proj = nn.Linear(C, H, bias=False)
        self.down_proj = nn.Linear(H, C, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class DecoderLayer(nn.Module):
    def __init__(self, C, NH, NKV, H, eps, theta):
        super().__init__()
        self.input_layernorm = RMSNorm(C, eps)
        self.self_attn = Attention(C, NH, NKV, theta)
        self.post_attention_layernorm = RMSNorm(C, eps)
        self.mlp = MLP(C, H)

    def forward(self, x):
        h = x + self.self_attn(self.input_layernorm(x))
        return h + self.mlp(self.post_attention_layernorm(h))


class LlamaModel(nn.Module):
    """HF's LlamaModel: the parameter names below are HF's, less the "model." prefix."""

    def __init__(self, L, NH, NKV, C, H, V, eps, theta):
        super().__init__()
        self.embed_tokens = nn.Embedding(V, C)
        self.layers = nn.ModuleList(DecoderLayer(C, NH, NKV, H, eps, theta) for _ in range(L))
        self.norm = RMSNorm(C, eps)


class Llama(nn.Module):
    """LlamaForCausalLM: model.* plus lm_head (absent when tied to model.embed_tokens)."""

    def __init__(self, L, NH, NKV, C, H, V, eps=1e-5, theta=10000.0, tie=False):
        super().__init__()
        self.V, self.tie = V, tie
        self.model = LlamaModel(L, NH, NKV, C, H, V, eps, theta)
        self.lm_head = None if tie else nn.Linear(C, V, bias=False)

    def hidden_states(self, idx):
        """[embedding output, residual stream after each layer] (before the final norm)."""
        x = self.model.embed_tokens(idx)
        hs = [x]
        for layer in self.model.layers:
            x = layer(x)
            hs.append(x)
        return hs

    def head_weight(self):
        return self.model.embed_tokens.weight if self.tie else self.lm_head.weight

    def forward(self, idx, return_hidden=False):
        hs = self.hidden_states(idx)
        logits = self.model.norm(hs[-1]) @ self.head_weight().t()
        return (logits, hs) if return_hidden else logits

    def loss(self, x, y):
        return F.cross_entropy(self(x).reshape(-1, self.V), y.reshape(-1))

    def flat_order(self):
        """(name, tensor, decays) in dtrun's flat parameter order."""
        out = [("model.embed_tokens.weight", self.model.embed_tokens.weight, False)]
        for l, ly in enumerate(self.model.layers):
            p = f"model.layers.{l}."
            out += [
                (p + "input_layernorm.weight", ly.input_layernorm.weight, False),
                (p + "self_attn.q_proj.weight", ly.self_attn.q_proj.weight, True),
                (p + "self_attn.k_proj.weight", ly.self_attn.k_proj.weight, True),
                (p + "self_attn.v_proj.weight", ly.self_attn.v_proj.weight, True),
                (p + "self_attn.o_proj.weight", ly.self_attn.o_proj.weight, True),
                (p + "post_attention_layernorm.weight", ly.post_attention_layernorm.weight, False),
                (p + "mlp.gate_proj.weight", ly.mlp.gate_proj.weight, True),
                (p + "mlp.up_proj.weight", ly.mlp.up_proj.weight, True),
                (p + "mlp.down_proj.weight", ly.mlp.down_proj.weight, True),
            ]
        out.append(("model.norm.weight", self.model.norm.weight, False))
        if not self.tie:
            out.append(("lm_head.weight", self.lm_head.weight, True))
        return out

    def flat(self, grad=False):
        ts = [t.grad if grad else t for _, t, _ in self.flat_order()]
        return torch.cat([t.detach().reshape(-1) for t in ts])

    def adamw(self, lr, betas, eps, weight_decay):
        """AdamW with decay on the 2-D weights but the embedding (norms undecayed), as dtrun."""
        order = self.flat_order()
        decay = [t for _, t, d in order if d]
        no_decay = [t for _, t, d in order if not d]
        return torch.optim.AdamW([{"params": decay, "weight_decay": weight_decay},
                                  {"params": no_decay, "weight_decay": 0.0}], lr=lr, betas=betas, eps=eps)
