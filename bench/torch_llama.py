#!/usr/bin/python3
"""PyTorch peer for bench/train_llama.sh: trains tests/reference/llama_torch.Llama (Hugging Face
LlamaForCausalLM's arithmetic) on random tokens with AdamW and clipping, as dtrun does, and prints
the median step time (ms).
usage: torch_llama.py L NH NKV C H V T B steps threads"""
import os
import statistics
import sys
import time

# see torch_gpt2.py: passive OpenMP waiting, set before torch loads libgomp
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import torch  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "reference"))
from llama_torch import Llama  # noqa: E402


def main():
    L, NH, NKV, C, H, V, T, B, steps, threads = (int(a) for a in sys.argv[1:11])
    torch.set_num_threads(threads)
    torch.set_flush_denormal(True)
    torch.manual_seed(0)
    model = Llama(L, NH, NKV, C, H, V)
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0.0, 0.02) if p.dim() == 2 else p.fill_(1.0)
    opt = model.adamw(3e-4, (0.9, 0.95), 1e-8, 0.1)
    times = []
    for _ in range(steps):
        tokens = torch.randint(0, V, (B, T + 1))
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = model.loss(tokens[:, :-1], tokens[:, 1:])
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        times.append(time.perf_counter() - t0)
    print(f"{statistics.median(times[2:]) * 1e3:.3f}")


if __name__ == "__main__":
    main()
