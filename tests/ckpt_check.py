#!/usr/bin/python3
"""Checks for tests/cli/test_ckpt.sh (Debian's python3 with python3-torch).

  ckpt_check.py compare A B FROM TO     the losses of steps FROM..TO in two runs' events.jsonl
                                        (a resumed run writes some steps twice: the last counts);
                                        prints "bitwise" or the largest relative difference, and
                                        fails when a step is missing in either
  ckpt_check.py safetensors DIR SHARD T B N
                                        DIR/model.safetensors read by the format's definition (an
                                        8-byte little-endian header length, a JSON header, raw
                                        little-endian tensors), its GPT-2 names and layouts mapped
                                        onto tests/reference/gpt_torch.py's GPT, and the mean loss
                                        over the first N batches of B windows of T+1 tokens of the
                                        llm.c token shard SHARD, as dtrun's validation takes them
  ckpt_check.py greedy-llama|greedy-gpt DIR IDS N
                                        N ids chosen greedily after the prompt IDS (1,2,3) by the
                                        reference model of a Hugging Face directory (as the loaders
                                        below read it), the whole sequence recomputed each step
  ckpt_check.py safetensors-llama DIR SHARD T B N
                                        the same for a Llama: DIR's config.json builds
                                        tests/reference/llama_torch.py's Llama, and its tensors (one
                                        model.safetensors, or the shards model.safetensors.index.json
                                        names; F32 or BF16) load by Hugging Face's names, every one
                                        of them used
"""
import json
import os
import struct
import sys


def step_losses(path):
    out = {}
    for line in open(path):
        e = json.loads(line)
        if e["type"] == "metrics":
            out[e["step"]] = e["loss"]
    return out


def compare(a, b, lo, hi):
    la, lb = step_losses(a), step_losses(b)
    worst, exact = 0.0, True
    for s in range(lo, hi + 1):
        if s not in la or s not in lb:
            print(f"step {s} missing in {a if s not in la else b}")
            return 1
        exact &= la[s] == lb[s]
        worst = max(worst, abs(la[s] - lb[s]) / abs(lb[s]))
    print("bitwise" if exact else f"{worst:.2e}")
    return 0


def read_safetensors(path):
    """name -> fp32 tensor; BF16 widened as its definition says (the upper 16 bits of an fp32)"""
    import torch
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
        data = f.read()
    header.pop("__metadata__", None)
    tensors = {}
    for name, t in header.items():
        lo, hi = t["data_offsets"]
        if t["dtype"] == "F32":
            vals = struct.unpack(f"<{(hi - lo) // 4}f", data[lo:hi])
        else:
            assert t["dtype"] == "BF16", (name, t["dtype"])
            half = struct.unpack(f"<{(hi - lo) // 2}H", data[lo:hi])
            vals = struct.unpack(f"<{len(half)}f", struct.pack(f"<{len(half)}I", *(h << 16 for h in half)))
        tensors[name] = torch.tensor(vals, dtype=torch.float32).reshape(t["shape"])
    return tensors


def shard_tokens(shard):
    """an llm.c token shard's tokens: magic 20240520 version 1 uint16, magic 20240801 version 7 uint32"""
    raw = open(shard, "rb").read()
    magic, version, ntok = struct.unpack("<3i", raw[:12])
    assert (magic, version) in ((20240520, 1), (20240801, 7)), (magic, version)
    fmt = "H" if version == 1 else "I"
    return struct.unpack(f"<{ntok}{fmt}", raw[1024:1024 + struct.calcsize(fmt) * ntok])


def mean_loss(model, tokens, T, B, N):
    import torch
    losses = []
    with torch.no_grad():
        for b in range(N):
            rows = [tokens[w * T: w * T + T + 1] for w in range(b * B, b * B + B)]
            x = torch.tensor([r[:-1] for r in rows])
            y = torch.tensor([r[1:] for r in rows])
            losses.append(model.loss(x, y).item())
    return sum(losses) / len(losses)


def load_gpt(d):
    """DIR's GPT-2 (config.json, model.safetensors) as the reference GPT"""
    import torch
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "reference"))
    from gpt_torch import GPT
    cfg = json.load(open(os.path.join(d, "config.json")))
    t = read_safetensors(os.path.join(d, "model.safetensors"))
    L, NH, C, V = cfg["n_layer"], cfg["n_head"], cfg["n_embd"], cfg["vocab_size"]
    model = GPT(L, NH, C, V, cfg["n_positions"])
    # Hugging Face GPT-2 -> the reference model: Conv1D weights are stored (in, out), nn.Linear's (out, in)
    with torch.no_grad():
        model.wte.weight.copy_(t["wte.weight"])
        model.wpe.weight.copy_(t["wpe.weight"])
        model.ln_f.weight.copy_(t["ln_f.weight"])
        model.ln_f.bias.copy_(t["ln_f.bias"])
        for i, blk in enumerate(model.blocks):
            h = lambda k: t[f"h.{i}.{k}"]
            blk.ln_1.weight.copy_(h("ln_1.weight")), blk.ln_1.bias.copy_(h("ln_1.bias"))
            blk.c_attn.weight.copy_(h("attn.c_attn.weight").t()), blk.c_attn.bias.copy_(h("attn.c_attn.bias"))
            blk.c_proj.weight.copy_(h("attn.c_proj.weight").t()), blk.c_proj.bias.copy_(h("attn.c_proj.bias"))
            blk.ln_2.weight.copy_(h("ln_2.weight")), blk.ln_2.bias.copy_(h("ln_2.bias"))
            blk.c_fc.weight.copy_(h("mlp.c_fc.weight").t()), blk.c_fc.bias.copy_(h("mlp.c_fc.bias"))
            blk.mlp_proj.weight.copy_(h("mlp.c_proj.weight").t()), blk.mlp_proj.bias.copy_(h("mlp.c_proj.bias"))
    expected = {"wte.weight", "wpe.weight", "ln_f.weight", "ln_f.bias"} | {
        f"h.{i}.{k}" for i in range(L) for k in ("ln_1.weight", "ln_1.bias", "attn.c_attn.weight",
                                                 "attn.c_attn.bias", "attn.c_proj.weight", "attn.c_proj.bias",
                                                 "ln_2.weight", "ln_2.bias", "mlp.c_fc.weight", "mlp.c_fc.bias",
                                                 "mlp.c_proj.weight", "mlp.c_proj.bias")}
    assert set(t) == expected, sorted(set(t) ^ expected)
    return model


def safetensors_loss(d, shard, T, B, N):
    print(f"{mean_loss(load_gpt(d), shard_tokens(shard), T, B, N):.6f}")
    return 0


def load_llama(d):
    """DIR's Llama (config.json, one file or shards) as the reference Llama"""
    import torch
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "reference"))
    from llama_torch import Llama
    cfg = json.load(open(os.path.join(d, "config.json")))
    assert cfg["model_type"] == "llama" and cfg["architectures"] == ["LlamaForCausalLM"], cfg
    index = os.path.join(d, "model.safetensors.index.json")
    t = {}
    if os.path.exists(index):
        files = sorted(set(json.load(open(index))["weight_map"].values()))
        for f in files:
            t.update(read_safetensors(os.path.join(d, f)))
        assert set(json.load(open(index))["weight_map"]) == set(t)
    else:
        t = read_safetensors(os.path.join(d, "model.safetensors"))
    model = Llama(cfg["num_hidden_layers"], cfg["num_attention_heads"], cfg["num_key_value_heads"],
                  cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"], cfg["rms_norm_eps"],
                  cfg["rope_theta"], cfg["tie_word_embeddings"])
    params = dict(model.named_parameters())
    assert set(params) == set(t), sorted(set(params) ^ set(t))
    with torch.no_grad():
        for name, p in params.items():
            p.copy_(t[name])
    return model


def safetensors_llama_loss(d, shard, T, B, N):
    print(f"{mean_loss(load_llama(d), shard_tokens(shard), T, B, N):.6f}")
    return 0


def greedy(kind, d, prompt, n):
    """n tokens chosen greedily after the comma-separated prompt ids, each from a forward over the whole
    sequence (no cache): Hugging Face generate's do_sample=False, the ids printed as dtrun generate --ids"""
    import torch
    model = load_llama(d) if kind == "llama" else load_gpt(d)
    ids = [int(x) for x in prompt.split(",")]
    out = []
    with torch.no_grad():
        for _ in range(n):
            logits = model(torch.tensor([ids]))
            t = int(torch.argmax(logits[0, -1]))
            ids.append(t)
            out.append(t)
    print(" ".join(map(str, out)))
    return 0


def main(argv):
    if argv[1] == "compare":
        return compare(argv[2], argv[3], int(argv[4]), int(argv[5]))
    if argv[1] == "safetensors":
        return safetensors_loss(argv[2], argv[3], int(argv[4]), int(argv[5]), int(argv[6]))
    if argv[1] in ("greedy-llama", "greedy-gpt"):
        return greedy(argv[1][7:], argv[2], argv[3], int(argv[4]))
    if argv[1] == "safetensors-llama":
        return safetensors_llama_loss(argv[2], argv[3], int(argv[4]), int(argv[5]), int(argv[6]))
    print(__doc__)
    return 2


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    sys.exit(main(sys.argv))
