#!/usr/bin/python3
"""Writes tests/reference/llama_fixture.bin and llama_fixture_mqa.bin: what
test_llama_reference checks the C Llama (src/model/llama.c) against.

Run with Debian's python3-torch:  /usr/bin/python3 tests/reference/make_llama_fixture.py [outdir]
The model is llama_torch.Llama, Hugging Face's LlamaForCausalLM arithmetic written out.
Each fixture holds the config, tokens, initial weights (dtrun's parameter order), the
residual stream after every block, logits, loss, every gradient, and the losses of 10
AdamW steps on the same batch (decay on the 2-D weights but the embedding, global-norm
clipping; each loss recorded before its step's update), all float32 little-endian.
Sizes are awkward on purpose (vocab not a multiple of 8, odd T):
  llama_fixture.bin      L=2, 4 query heads on 2 kv heads (GQA), head dim 6, C=24, H=40,
                         V=61, T=7, B=3, own lm_head, rms_eps 1e-5, rope_theta 1e4
  llama_fixture_mqa.bin  L=2, 3 query heads on 1 kv head (MQA), head dim 4, C=12, H=20,
                         V=53, T=9, B=2, lm_head tied to the embedding, rms_eps 1e-6,
                         rope_theta 5e5
Before writing, the model is checked against an independent naive float64 forward
(per-head loops, rotary as explicit 2-D rotations of the (i, i + hs/2) pairs), rotary
properties, and central finite differences of gradient entries in float64.

Layout: b"DTLX", int32 version=1, int32 L, NH, NKV, C, H (intermediate size), V, T, B,
steps, tie (0/1), float32 rms_eps, rope_theta, lr, beta1, beta2, adam_eps, weight_decay,
clip, int32 tokens[B*(T+1)], float32 params[N], hidden[(L+1)*B*T*C], logits[B*T*V],
loss, grads[N], step_losses[steps].
hidden[0] is the embedding output, hidden[l+1] the residual stream after layer l (before
the final norm). params/grads in dtrun's flat order: model.embed_tokens.weight (V,C);
per layer input_layernorm (C), q_proj (NH*hs,C), k_proj (NKV*hs,C), v_proj (NKV*hs,C),
o_proj (C,NH*hs), post_attention_layernorm (C), gate_proj (H,C), up_proj (H,C),
down_proj (C,H); model.norm.weight (C); lm_head.weight (V,C) only when tie == 0.
"""
import copy
import math
import os
import struct
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from llama_torch import Llama, apply_rope, rope_cos_sin  # noqa: E402

STEPS = 10
LR, BETAS, EPS, WD, CLIP = 1e-2, (0.9, 0.95), 1e-8, 0.1, 1.0
FIXTURES = [  # file, L, NH, NKV, C, H, V, T, B, tie, rms_eps, rope_theta, seed
    ("llama_fixture.bin", 2, 4, 2, 24, 40, 61, 7, 3, 0, 1e-5, 10000.0, 20240601),
    ("llama_fixture_mqa.bin", 2, 3, 1, 12, 20, 53, 9, 2, 1, 1e-6, 500000.0, 20240602),
]


def init_(model):
    """N(0, 0.02) matrices, N(1, 0.1) norm weights (non-trivial so their gradients are tested)."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name:
                p.normal_(1.0, 0.1)
            else:
                p.normal_(0.0, 0.02)


# ---------------------------------------------------------------- independent checks

def naive_logits(m, idx):
    """LlamaForCausalLM's forward in float64 without the module code: loops over heads and
    positions, rotary as explicit rotations, kv head of query head h = h // (NH / NKV)."""
    W = {n: t.detach().double() for n, t, _ in m.flat_order()}
    emb = W["model.embed_tokens.weight"]
    head = emb if m.tie else W["lm_head.weight"]
    a0 = m.model.layers[0].self_attn
    NH, NKV, hs, theta = a0.NH, a0.NKV, a0.hs, a0.theta
    eps = m.model.norm.eps
    B, T = idx.shape

    def rms(x, w):
        return x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps) * w

    def rot(v, pos):  # v (hs,)
        out = v.clone()
        for i in range(hs // 2):
            ang = pos * (1.0 / theta ** (2 * i / hs))
            c, s = math.cos(ang), math.sin(ang)
            a, b = v[i].item(), v[i + hs // 2].item()
            out[i], out[i + hs // 2] = a * c - b * s, a * s + b * c
        return out

    x = emb[idx]  # (B,T,C)
    hidden = [x.clone()]
    for l in range(len(m.model.layers)):
        p = lambda s: W[f"model.layers.{l}.{s}.weight"]  # noqa: E731
        n = rms(x, p("input_layernorm"))
        q, k, v = n @ p("self_attn.q_proj").t(), n @ p("self_attn.k_proj").t(), n @ p("self_attn.v_proj").t()
        y = torch.zeros(B, T, NH * hs, dtype=torch.float64)
        for b in range(B):
            for h in range(NH):
                g = h // (NH // NKV)
                qs = [rot(q[b, t, h * hs:(h + 1) * hs], t) for t in range(T)]
                ks = [rot(k[b, t, g * hs:(g + 1) * hs], t) for t in range(T)]
                for t in range(T):
                    sc = torch.tensor([float(qs[t] @ ks[u]) / math.sqrt(hs) for u in range(t + 1)], dtype=torch.float64)
                    e = torch.exp(sc - sc.max())
                    w = e / e.sum()
                    y[b, t, h * hs:(h + 1) * hs] = sum(w[u] * v[b, u, g * hs:(g + 1) * hs] for u in range(t + 1))
        h_ = x + y @ p("self_attn.o_proj").t()
        n2 = rms(h_, p("post_attention_layernorm"))
        gt = n2 @ p("mlp.gate_proj").t()
        x = h_ + ((gt / (1 + torch.exp(-gt))) * (n2 @ p("mlp.up_proj").t())) @ p("mlp.down_proj").t()
        hidden.append(x.clone())
    return rms(x, W["model.norm.weight"]) @ head.t(), hidden


def max_rel(a, b):
    return ((a - b).abs().max() / b.abs().max()).item()


def check(model, x, y, cfg):
    name, L, NH, NKV, C, H, V, T, B, tie, eps, theta, seed = cfg
    hs = C // NH
    m64 = copy.deepcopy(model).double()

    # 1. the module forward against the naive one, float64 and float32
    ref, ref_hidden = naive_logits(m64, x)
    got, got_hidden = m64(x, return_hidden=True)
    e64 = max(max_rel(got.detach(), ref), *(max_rel(a.detach(), b) for a, b in zip(got_hidden, ref_hidden)))
    assert e64 < 1e-12, f"{name}: module vs naive forward (float64): {e64:.3g}"
    got32, h32 = model(x, return_hidden=True)
    e32 = max(max_rel(got32.detach().double(), ref),
              *(max_rel(a.detach().double(), b) for a, b in zip(h32, ref_hidden)))
    assert e32 < 1e-5, f"{name}: float32 forward vs float64 naive: {e32:.3g}"

    # 2. with NKV == NH the same code is plain MHA: build one by repeating each kv head's
    #    rows of k_proj/v_proj, which must give identical logits (GQA mapping is h // group)
    mha = Llama(L, NH, NH, C, H, V, eps, theta, bool(tie)).double()
    with torch.no_grad():
        for (_, d, _), (_, s, _) in zip(mha.flat_order(), m64.flat_order()):
            if d.shape == s.shape:
                d.copy_(s)
            else:  # (NKV*hs, C) -> (NH*hs, C)
                d.copy_(s.view(NKV, 1, hs, C).expand(NKV, NH // NKV, hs, C).reshape(NH * hs, C))
    e_mha = max_rel(mha(x).detach(), got.detach())
    assert e_mha < 1e-12, f"{name}: GQA vs equivalent MHA: {e_mha:.3g}"

    # 3. rotary: position 0 is the identity, norms are kept, scores depend only on the offset
    cos, sin = rope_cos_sin(T + 5, hs, theta, torch.float64)
    z = torch.randn(1, 1, T + 5, hs, dtype=torch.float64)
    r = apply_rope(z, cos, sin)
    assert torch.equal(r[..., 0, :], z[..., 0, :]), "rope at position 0 is not the identity"
    assert torch.allclose(r.norm(dim=-1), z.norm(dim=-1), rtol=1e-12), "rope changes norms"
    qv, kv = torch.randn(hs, dtype=torch.float64), torch.randn(hs, dtype=torch.float64)
    qq = apply_rope(qv.expand(1, 1, T + 5, hs), cos, sin)[0, 0]
    kk = apply_rope(kv.expand(1, 1, T + 5, hs), cos, sin)[0, 0]
    s1, s2 = float(qq[3] @ kk[1]), float(qq[T + 4] @ kk[T + 2])
    assert abs(s1 - s2) < 1e-6 * max(1.0, abs(s1)), f"rope scores not relative: {s1} vs {s2}"

    # 4. central finite differences in float64 of a few entries of every tensor
    m64.zero_grad()
    m64.loss(x, y).backward()
    worst = 0.0
    gen = torch.Generator().manual_seed(seed)
    for pname, t, _ in m64.flat_order():
        for _ in range(3):
            i = int(torch.randint(0, t.numel(), (1,), generator=gen))
            flat = t.data.view(-1)
            old, h = flat[i].item(), 1e-5
            with torch.no_grad():
                flat[i] = old + h
                lp = m64.loss(x, y).item()
                flat[i] = old - h
                lm = m64.loss(x, y).item()
                flat[i] = old
            fd, an = (lp - lm) / (2 * h), t.grad.view(-1)[i].item()
            # loss ~4 in float64 and h = 1e-5: rounding ~1e-11, truncation ~1e-10 absolute
            assert abs(fd - an) <= 1e-6 * abs(an) + 1e-9, f"{name}: {pname}[{i}]: fd {fd:.10g}, autograd {an:.10g}"
            worst = max(worst, abs(fd - an))

    # 5. float32 gradients agree with float64 ones
    model.zero_grad()
    model.loss(x, y).backward()
    eg = max(max_rel(a.grad.double(), b.grad) for (_, a, _), (_, b, _) in zip(model.flat_order(), m64.flat_order()))
    model.zero_grad()
    print(f"  {name} checks: module vs naive forward {e64:.1e} (f64) {e32:.1e} (f32); GQA vs MHA {e_mha:.1e}; "
          f"rope ok; finite differences worst |fd - autograd| {worst:.1e}; f32 vs f64 grads {eg:.1e}")


# ---------------------------------------------------------------- fixture

def write(outdir, cfg):
    name, L, NH, NKV, C, H, V, T, B, tie, eps, theta, seed = cfg
    torch.manual_seed(seed)
    model = Llama(L, NH, NKV, C, H, V, eps, theta, bool(tie))
    init_(model)
    tokens = torch.randint(0, V, (B, T + 1))
    x, y = tokens[:, :-1], tokens[:, 1:]
    names = [n for n, _, _ in model.flat_order()]
    assert sorted(names) == sorted(n for n, _ in model.named_parameters() if not (tie and n == "lm_head.weight"))
    check(model, x, y, cfg)
    params0 = model.flat()

    logits, hidden = model(x, return_hidden=True)
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, V), y.reshape(-1))
    loss.backward()
    grads = model.flat(grad=True)
    hidden = torch.cat([h.detach().reshape(-1) for h in hidden])

    opt = model.adamw(LR, BETAS, EPS, WD)
    step_losses = []
    for _ in range(STEPS):
        opt.zero_grad()
        l = model.loss(x, y)
        l.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), CLIP)
        opt.step()
        step_losses.append(l.item())

    path = os.path.join(outdir, name)
    with open(path, "wb") as f:
        f.write(b"DTLX")
        f.write(struct.pack("<11i", 1, L, NH, NKV, C, H, V, T, B, STEPS, tie))
        f.write(struct.pack("<8f", eps, theta, LR, BETAS[0], BETAS[1], EPS, WD, CLIP))
        f.write(tokens.to(torch.int32).numpy().tobytes())
        for t in (params0, hidden, logits.detach().reshape(-1), loss.detach().reshape(1), grads,
                  torch.tensor(step_losses)):
            f.write(t.to(torch.float32).numpy().tobytes())
    print(f"{path}: {params0.numel()} parameters, {os.path.getsize(path)} bytes, "
          f"loss {loss.item():.6f} -> {step_losses[-1]:.6f}; step losses "
          + " ".join(f"{s:.6f}" for s in step_losses[:3]))


def main(outdir):
    torch.set_num_threads(1)
    for cfg in FIXTURES:
        write(outdir, cfg)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__)))
