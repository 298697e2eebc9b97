#!/usr/bin/python3
"""Writes tests/reference/gpt_fixture.bin: the same GPT-2 as src/model/gpt.c, in PyTorch.

Run with Debian's python3-torch:  /usr/bin/python3 tests/reference/make_gpt_fixture.py
The fixture holds the config, tokens, initial weights (llm.c's parameter order),
logits, loss, every gradient, and the losses of 10 AdamW steps (decay on matrices
only, global-norm clipping), all float32 little-endian. Sizes are awkward on
purpose: head dim 5 (odd), vocab 61 (not a multiple of 8), seq_len 7.

Layout: b"DTFX", int32 version=1, int32 n_layer, n_head, n_embd, vocab, T, B, steps,
float32 lr, beta1, beta2, eps, weight_decay, clip, int32 tokens[B*(T+1)],
float32 params[N], logits[B*T*V], loss, grads[N], step_losses[steps].
"""
import math
import struct
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

L, NH, C, V, T, B, STEPS = 2, 3, 15, 61, 7, 3, 10
LR, BETAS, EPS, WD, CLIP = 1e-2, (0.9, 0.95), 1e-8, 0.1, 1.0


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln_1 = nn.LayerNorm(C)
        self.c_attn = nn.Linear(C, 3 * C)
        self.c_proj = nn.Linear(C, C)
        self.ln_2 = nn.LayerNorm(C)
        self.c_fc = nn.Linear(C, 4 * C)
        self.mlp_proj = nn.Linear(4 * C, C)

    def forward(self, x):
        b, t, _ = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(C, dim=2)
        q, k, v = (z.view(b, t, NH, C // NH).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(C // NH)
        mask = torch.tril(torch.ones(t, t, dtype=torch.bool))
        att = F.softmax(att.masked_fill(~mask, float("-inf")), dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(b, t, C)
        x = x + self.c_proj(y)
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte = nn.Embedding(V, C)
        self.wpe = nn.Embedding(T, C)
        self.blocks = nn.ModuleList(Block() for _ in range(L))
        self.ln_f = nn.LayerNorm(C)

    def forward(self, idx):
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1]))
        for blk in self.blocks:
            x = blk(x)
        return self.ln_f(x) @ self.wte.weight.t()  # tied output layer

    def llmc_order(self):
        """Tensors in llm.c's ParameterTensors order, each paired with whether it decays."""
        per = lambda f: [f(b) for b in self.blocks]
        return [
            ([self.wte.weight], False), ([self.wpe.weight], False),
            (per(lambda b: b.ln_1.weight), False), (per(lambda b: b.ln_1.bias), False),
            (per(lambda b: b.c_attn.weight), True), (per(lambda b: b.c_attn.bias), False),
            (per(lambda b: b.c_proj.weight), True), (per(lambda b: b.c_proj.bias), False),
            (per(lambda b: b.ln_2.weight), False), (per(lambda b: b.ln_2.bias), False),
            (per(lambda b: b.c_fc.weight), True), (per(lambda b: b.c_fc.bias), False),
            (per(lambda b: b.mlp_proj.weight), True), (per(lambda b: b.mlp_proj.bias), False),
            ([self.ln_f.weight], False), ([self.ln_f.bias], False),
        ]

    def flat(self, grad=False):
        ts = [t.grad if grad else t for group, _ in self.llmc_order() for t in group]
        return torch.cat([t.detach().reshape(-1) for t in ts])


def main(path):
    torch.manual_seed(20240520)
    torch.set_num_threads(1)
    model = GPT()
    with torch.no_grad():  # GPT-2's init, with non-trivial norms and biases so their gradients are tested
        for name, p in model.named_parameters():
            if name.endswith("bias"):
                p.normal_(0.0, 0.02)
            elif "ln_" in name:
                p.normal_(1.0, 0.1)
            else:
                p.normal_(0.0, 0.02)
    tokens = torch.randint(0, V, (B, T + 1))
    x, y = tokens[:, :-1], tokens[:, 1:]
    params0 = model.flat()

    logits = model(x)
    loss = F.cross_entropy(logits.reshape(-1, V), y.reshape(-1))
    loss.backward()
    grads = model.flat(grad=True)

    decay = [t for group, d in model.llmc_order() if d for t in group]
    no_decay = [t for group, d in model.llmc_order() if not d for t in group]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": WD}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=LR, betas=BETAS, eps=EPS)
    step_losses = []
    for _ in range(STEPS):
        opt.zero_grad()
        l = F.cross_entropy(model(x).reshape(-1, V), y.reshape(-1))
        l.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), CLIP)
        opt.step()
        step_losses.append(l.item())

    with open(path, "wb") as f:
        f.write(b"DTFX")
        f.write(struct.pack("<8i", 1, L, NH, C, V, T, B, STEPS))
        f.write(struct.pack("<6f", LR, BETAS[0], BETAS[1], EPS, WD, CLIP))
        f.write(tokens.to(torch.int32).numpy().tobytes())
        for t in (params0, logits.detach().reshape(-1), loss.detach().reshape(1), grads, torch.tensor(step_losses)):
            f.write(t.to(torch.float32).numpy().tobytes())
    print(f"{path}: {params0.numel()} parameters, loss {loss.item():.6f} -> {step_losses[-1]:.6f}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "tests/reference/gpt_fixture.bin")
