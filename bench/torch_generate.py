#!/usr/bin/python3
"""torch_generate.py DIR PROMPT_IDS N: greedy tokens/s of PyTorch on a Hugging Face GPT-2 directory
(as tests/ckpt_check.py loads it into tests/reference/gpt_torch.py's GPT), the peer of
`dtrun generate --temperature 0` in bench/generate.sh, two ways: with a key/value cache written
out by hand (the per-token cost transformers' generate pays: each layer's keys and values kept, one
token's forward a step), and without one (nanoGPT's sample.py and llm.c's loop: the whole sequence
again each step). Prints the prefill seconds and the tokens/s after the first token of each, and
whether their ids agree."""
import math
import os
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
from ckpt_check import load_gpt  # noqa: E402


def cached(model, ids, n):
    C = model.wte.weight.shape[1]
    cache = [None] * len(model.blocks)

    def step(tokens, pos):
        x = model.wte(tokens) + model.wpe(torch.arange(pos, pos + tokens.shape[1]))
        for i, blk in enumerate(model.blocks):
            b, t, _ = x.shape
            q, k, v = blk.c_attn(blk.ln_1(x)).split(C, dim=2)
            q, k, v = (z.view(b, t, blk.NH, C // blk.NH).transpose(1, 2) for z in (q, k, v))
            if cache[i] is not None:
                k, v = torch.cat([cache[i][0], k], 2), torch.cat([cache[i][1], v], 2)
            cache[i] = (k, v)
            att = (q @ k.transpose(-2, -1)) / math.sqrt(C // blk.NH)
            if t > 1:
                att = att.masked_fill(~torch.tril(torch.ones(t, t, dtype=torch.bool)), float("-inf"))
            y = (F.softmax(att, dim=-1) @ v).transpose(1, 2).contiguous().view(b, t, C)
            x = x + blk.c_proj(y)
            x = x + blk.mlp_proj(F.gelu(blk.c_fc(blk.ln_2(x)), approximate="tanh"))
        return model.ln_f(x[:, -1]) @ model.wte.weight.t()

    out = []
    t0 = time.perf_counter()
    logits = step(torch.tensor([ids]), 0)
    t1 = time.perf_counter()
    for i in range(n):
        tok = int(torch.argmax(logits[0]))
        out.append(tok)
        if i + 1 < n:
            logits = step(torch.tensor([[tok]]), len(ids) + i)
    return out, t1 - t0, time.perf_counter() - t1


def recompute(model, ids, n):
    ids, out = list(ids), []
    t0 = time.perf_counter()
    t1 = None
    for _ in range(n):
        tok = int(torch.argmax(model(torch.tensor([ids]))[0, -1]))
        if t1 is None:
            t1 = time.perf_counter()
        ids.append(tok)
        out.append(tok)
    return out, t1 - t0, time.perf_counter() - t1


def main():
    model = load_gpt(sys.argv[1])
    ids, n = [int(x) for x in sys.argv[2].split(",")], int(sys.argv[3])
    with torch.no_grad():
        a, pa, da = cached(model, ids, n)
        b, pb, db = recompute(model, ids, n)
    print(f"torch cached: prefill {pa:.3f} s, {(n - 1) / da:.1f} tokens/s")
    print(f"torch recompute: prefill {pb:.3f} s, {(n - 1) / db:.1f} tokens/s")
    print("ids: " + " ".join(map(str, a)))
    print("same ids both ways: " + ("yes" if a == b else "no"))


if __name__ == "__main__":
    main()
