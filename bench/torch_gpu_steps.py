"""The training loop bench/gpu.sh's PyTorch peers share (torch_gpt2_gpu.py, torch_llama_gpu.py):
fused AdamW (decay 0.1 on the parameters `decays` names), bf16 autocast, clipping at 1.0, random
tokens, eager or torch.compile; prints "MODE B T median_ms tokens_per_s peak_allocated_MiB
peak_reserved_MiB" (the median over the steps after the first five)."""
import statistics
import time

import torch


def train(model, decays, mode, V, T, B, steps, dev):
    decay = [p for n, p in model.named_parameters() if decays(n, p)]
    rest = [p for n, p in model.named_parameters() if not decays(n, p)]
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
