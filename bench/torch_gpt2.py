#!/usr/bin/python3
"""PyTorch peer for bench/train_gpt2.sh: trains tests/reference/gpt_torch.GPT on random
tokens with AdamW and clipping, as dtrun does, and prints the median step time (ms).
usage: torch_gpt2.py L NH C V T B steps threads"""
import os
import statistics
import sys
import time

# Debian's torch multiplies on OpenBLAS's own pthread pool, beside the libgomp pool of its other ops,
# whose idle threads spin: on 2 cores the pools took turns and a tiny step swung between 22 and 140 ms
# within one process (most of its time in libgomp's spin and sched_yield). Passive waiting lets both
# run at full speed (tiny: 22-23 ms every step). Set before torch loads libgomp; a caller's value wins.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import torch  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "reference"))
from gpt_torch import GPT  # noqa: E402


def main():
    L, NH, C, V, T, B, steps, threads = (int(a) for a in sys.argv[1:9])
    torch.set_num_threads(threads)
    # as dtrun does: without it AdamW's decaying moments go denormal and steps slow ~4x
    torch.set_flush_denormal(True)
    torch.manual_seed(0)
    model = GPT(L, NH, C, V, T)
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
