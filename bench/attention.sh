#!/usr/bin/env bash
# Attention at longer sequences: the GPT-2 124M shape with one sequence of T tokens (B1), fp32, for
# T = 256, 512 and 1024: the activation memory the run reports (the blocked kernels keep each row's
# log-sum-exp, not the T x T softmax) and attention's forward and backward ms per step from the
# per-op table (events.wall_clock_breakdown), with their share of the step. Then multi-query
# attention at batch 1 on one thread and on all of them, beside PyTorch on the same shape.
# usage: bench/attention.sh [BUILD_DIR] [STEPS]   (defaults: build 4)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
case $build in /*) dtrun=$build/src/dtrun ;; *) dtrun=$PWD/$build/src/dtrun ;; esac
steps=${2:-4}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), ${OMP_NUM_THREADS:-$(nproc)} threads"
printf '%6s %16s %22s %22s\n' T activations attention_forward attention_backward
for T in 256 512 1024; do
    out=$(cd "$tmp" && "$dtrun" run model.n_layer=12 model.n_head=12 model.n_embd=768 model.vocab_size=50257 \
        model.seq_len="$T" data.micro_batch_size=1 run.max_duration="$steps"ba events.wall_clock_breakdown=true \
        run.eval_interval=0ba events.interval=1ba events.jsonl=null checkpoint.dir=null run.dir=r 2>&1)
    rm -rf "$tmp/r"
    acts=$(sed -n 's/.*activations \([0-9.]* MiB\).*/\1/p' <<<"$out" | head -1)
    op() { awk -v op="$1" '$1 == op { printf "%s ms (%s)", $2, $4 }' <<<"$out"; }
    printf '%6s %16s %22s %22s\n' "$T" "$acts" "$(op attention_forward)" "$(op attention_backward)"
done

# Multi-query attention at batch 1 (one key/value head for 32 query heads of 64, T = 512): backward
# splits the group's query heads into chunks, a thread each (kernels/cpu/attention.c: the same bits on
# any number of threads), so it scales with the threads where one (batch, key/value head) is all the
# work there is. Beside it PyTorch's attention forward and backward on the same shape and threads:
# F.scaled_dot_product_attention where the installed PyTorch has it, else the matmul-softmax-matmul
# it replaces (Debian's 1.13), K and V expanded to the query heads.
threads=${OMP_NUM_THREADS:-$(nproc)}
echo
echo "multi-query attention, B=1 T=512, 32 query heads on 1 key/value head of 64: ms per layer"
printf '%-40s %12s %12s\n' "" attention_forward attention_backward
for n in 1 "$threads"; do
    out=$(cd "$tmp" && OMP_NUM_THREADS=$n "$dtrun" run model.type=llama model.n_layer=1 model.n_head=32 \
        model.n_kv_head=1 model.n_embd=2048 model.intermediate_size=256 model.vocab_size=256 model.seq_len=512 \
        data.micro_batch_size=1 run.max_duration="$steps"ba events.wall_clock_breakdown=true run.eval_interval=0ba \
        events.interval=1ba events.jsonl=null checkpoint.dir=null run.dir=r 2>&1)
    rm -rf "$tmp/r"
    op() { awk -v op="$1" '$1 == op { print $2 }' <<<"$out"; }
    printf '%-40s %12s %12s\n' "dtrun, $n thread(s)" "$(op attention_forward)" "$(op attention_backward)"
done
/usr/bin/python3 - "$threads" "$steps" <<'PY'
import math, sys, time, torch
import torch.nn.functional as F
torch.set_num_threads(int(sys.argv[1]))
steps = int(sys.argv[2])
q = torch.randn(1, 32, 512, 64, requires_grad=True)
kv = torch.randn(1, 2, 512, 64, requires_grad=True)
mask = torch.ones(512, 512, dtype=torch.bool).triu(1)
def attend(q, k, v):
    if hasattr(F, 'scaled_dot_product_attention'):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)
    s = (q @ k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
    return torch.softmax(s.masked_fill(mask, float('-inf')), -1) @ v
def once():
    k, v = kv[:, :1].expand(1, 32, 512, 64), kv[:, 1:].expand(1, 32, 512, 64)
    t0 = time.perf_counter(); y = attend(q, k, v); t1 = time.perf_counter()
    y.sum().backward(); t2 = time.perf_counter()
    return t1 - t0, t2 - t1
once()
f = b = 0
for _ in range(steps):
    x, y = once(); f += x; b += y
print('%-40s %12.3f %12.3f' % ('PyTorch %s, %s thread(s)' % (torch.__version__, sys.argv[1]), 1e3 * f / steps, 1e3 * b / steps))
PY
