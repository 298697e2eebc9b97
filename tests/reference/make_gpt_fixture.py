#!/usr/bin/python3
"""Writes tests/reference/gpt_fixture.bin: what test_gpt_reference checks the C GPT against.

Run with Debian's python3-torch:  /usr/bin/python3 tests/reference/make_gpt_fixture.py
The model is gpt_torch.GPT. The fixture holds the config, tokens, initial weights
(llm.c's parameter order), logits, loss, every gradient, and the losses of 10 AdamW
steps (decay on matrices only, global-norm clipping), all float32 little-endian.
Sizes are awkward on purpose: head dim 5 (odd), vocab 61 (not a multiple of 8), seq_len 7.

Layout: b"DTFX", int32 version=1, int32 n_layer, n_head, n_embd, vocab, T, B, steps,
float32 lr, beta1, beta2, eps, weight_decay, clip, int32 tokens[B*(T+1)],
float32 params[N], logits[B*T*V], loss, grads[N], step_losses[steps].
"""
import os
import struct
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpt_torch import GPT  # noqa: E402

L, NH, C, V, T, B, STEPS = 2, 3, 15, 61, 7, 3, 10
LR, BETAS, EPS, WD, CLIP = 1e-2, (0.9, 0.95), 1e-8, 0.1, 1.0


def main(path):
    torch.manual_seed(20240520)
    torch.set_num_threads(1)
    model = GPT(L, NH, C, V, T)
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
    loss = model.loss(x, y)
    loss.backward()
    grads = model.flat(grad=True)

    opt = model.adamw(LR, BETAS, EPS, WD)
    step_losses = []
    for _ in range(STEPS):
        opt.zero_grad()
        l = model.loss(x, y)
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
