#!/usr/bin/env python3
"""Writes the seed corpora of tests/fuzz/corpus/ and the dictionaries tests/fuzz/<target>.dict
(committed; run again only to change them).

Small inputs, valid and broken, per target: the YAML and JSON templates, llm.c token shards and
weight files, checkpoint rank files and manifests in dtrun's formats (ckpt.h, shard.h, gpt.h),
HTTP responses, writer scripts for fuzz_json.c, plugstack.conf arguments, safetensors files and
Hugging Face indexes with their shards (the layouts fuzz_safetensors.c reads).
    python3 tests/fuzz/make_seeds.py        (from the source tree's top)
"""
import json
import os
import re
import shutil
import struct

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(TOP, "tests", "fuzz", "corpus")


def put(target, name, data):
    d = os.path.join(OUT, target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def config():
    for t in sorted(os.listdir(os.path.join(TOP, "templates"))):
        if t.endswith(".yaml"):
            shutil.copy(os.path.join(TOP, "templates", t), os.path.join(OUT, "config", t))
    shutil.copy(os.path.join(TOP, "etc", "dtrun.yaml.example"), os.path.join(OUT, "config", "site.yaml"))
    put("config", "mlp.yaml", "model: {type: mlp, mlp: {hidden: [32, 32], task: regression, in_features: 4}}\n"
        "data: {synthetic: {kind: teacher}}\n")
    put("config", "sched.yaml", "scheduler:\n  type: composite\n  phases:\n    - {type: linear, start: 0.0, end: 1.0, "
        "length: 0.1}\n    - {type: cosine, start: 1.0, end: 0.1, length: 0.9}\nrun: {max_duration: 3ep}\n"
        "data: {train: 'x_*.bin'}\n")
    put("config", "auto.yaml", "compute: {num_devices: auto, num_nodes: auto, gradient_accumulation_steps: auto, "
        "strategy: zero3, grad_reduce_dtype: bf16}\ncheckpoint: {interval: 30min}\n")
    put("config", "webhook.yaml", "events:\n  webhook: {url: 'https://user:pw@hooks.example.org/x?a=1', batch: 4, "
        "secret_env: DT_SECRET}\nslurm: {time: '1-12:00', partition: gpu}\n")
    put("config", "anchors.yaml", "a: &x {lr: 1e-3}\noptimizer: *x\n")
    put("config", "dup.yaml", "run:\n  name: a\n  name: b\n")
    put("config", "typo.yaml", "optimiser: {lr: 0.1}\nrun: {max_duraton: 10ba}\n")
    put("config", "types.yaml", "run: {seed: 99999999999999999999999, max_duration: -3ba}\noptimizer: {lr: 1e999, "
        "betas: [0.9]}\ncompute: {precision: 64}\n")
    put("config", "latin1.yaml", b"run:\n  name: caf\xe9\n")
    put("config", "nul.yaml", b"run:\n  name: x\n\x7fELF\x02\x01\x00\x00")
    put("config", "deep.yaml", "run: " + "[" * 80)
    put("config", "flow.yaml", '{"run": {"name": "tab\\there \\"q\\"", "max_duration": "1.5Mtok"}, '
        '"optimizer": {"lr": 0.1, "betas": [0.85, 0.975]}, "compute": {"comm_timeout": "250ms"}}\n')


def deepspeed():
    for t in sorted(os.listdir(os.path.join(TOP, "templates", "deepspeed"))):
        shutil.copy(os.path.join(TOP, "templates", "deepspeed", t), os.path.join(OUT, "deepspeed", t))
    put("deepspeed", "auto.json", json.dumps({"train_batch_size": "auto", "train_micro_batch_size_per_gpu": "auto",
                                              "gradient_accumulation_steps": "auto", "gradient_clipping": "auto",
                                              "zero_optimization": {"stage": 2}}))
    put("deepspeed", "mismatch.json", json.dumps({"train_batch_size": 33, "train_micro_batch_size_per_gpu": 8,
                                                  "gradient_accumulation_steps": 3, "gradient_clipping": 2.0}))
    put("deepspeed", "only_train.json", json.dumps({"train_batch_size": 48, "fp16": {"enabled": True,
                                                    "loss_scale": 0, "initial_scale_power": 12}}))
    put("deepspeed", "optim.json", json.dumps({
        "optimizer": {"type": "AdamW", "params": {"lr": 3e-4, "betas": [0.9, 0.95], "eps": 1e-8,
                                                  "weight_decay": 0.1}},
        "scheduler": {"type": "WarmupDecayLR", "params": {"warmup_min_lr": 0, "warmup_max_lr": 3e-4,
                                                          "warmup_num_steps": 10, "total_num_steps": 100}},
        "bf16": {"enabled": True}, "steps_per_print": 10, "wall_clock_breakdown": False,
        "zero_optimization": {"stage": 3, "offload_optimizer": {"device": "cpu", "pin_memory": True},
                              "stage3_prefetch_bucket_size": "auto", "reduce_bucket_size": "auto"}}))
    put("deepspeed", "bad.json", '{"train_batch_size": "lots", "zero_optimization": {"stage": 7}, "fp16": [1],}')
    put("deepspeed", "ignored.json", json.dumps({"activation_checkpointing": {"partition_activations": True},
                                                 "flops_profiler": {"enabled": True}, "train_batch_size": 4}))


def overrides():
    put("overrides", "basic", "optimizer.lr=1e-3\ncompute.num_devices=3\noptimizer.betas=[0.85, 0.975]\n"
        "compute.comm_timeout=250ms")
    put("overrides", "strings", "run.name='a b'\nrun.max_duration=5Mtok\ncheckpoint.interval=0.5dur\n"
        "events.webhook.url=http://localhost:8000/x")
    put("overrides", "bad", "optimizer.lr\n=3\noptimiser.lr=1\nrun.seed=[1\nmodel..x=1\ncompute.precision=16-true")
    put("overrides", "deepspeed", "compute.strategy=deepspeed\ncompute.strategy_config.config=/nonexistent.json")
    put("overrides", "webhook", "events.webhook.url=https://hooks.example.org:8443/dtrun?k=1\nevents.webhook.batch=8\n"
        "events.webhook.url=http://evil.example.com/x")
    put("overrides", "nulls", "data.train=null\nmodel.init_from=~\nscheduler.milestones=[10, 20]\n"
        "scheduler.type=multistep")


def timestr():
    for i, (u, s) in enumerate([(0, "2000ba"), (0, "3ep"), (0, "100000sp"), (0, "5Mtok"), (1, "0.1dur"),
                                (2, "30min"), (2, "1.5h"), (2, "600s"), (0, "1e3ba"), (3, "7Kba"), (0, "250ms"),
                                (0, "10m"), (0, "1d"), (0, "1-12:00"), (0, "04:00:00"), (0, "UNLIMITED"),
                                (0, "90"), (0, "-3ba"), (2, "0.5s"), (0, "2Ttok")]):
        put("timestr", "%02d" % i, bytes([u]) + s.encode())
    put("timestr", "double", b"\x00" + struct.pack("<d", 0.1) + b"ba")


def precision():
    for i, (b, s) in enumerate([(0, "32-true"), (0, "32"), (1, "16-mixed"), (0, "16"), (0, "bf16-mixed"),
                                (0, "bf16"), (0, "bf16-true"), (0, "64"), (0, "16-true"), (0, "transformer-engine"),
                                (0, "BF16"), (2, "fp32"), (2, "bf16"), (3, "fp16"), (0, "")]):
        put("precision", "%02d" % i, bytes([b]) + s.encode())


def shard(tokens, magic=20240520, version=1, count=None, width="H"):
    hdr = struct.pack("<256i", magic, version, len(tokens) if count is None else count, *([0] * 253))
    return hdr + struct.pack("<%d%s" % (len(tokens), width), *tokens)


def shards():
    toks = [(i * 7) % 200 for i in range(80)]
    put("shard", "valid", shard(toks))
    put("shard", "gpt2", shard([50256, 464, 2068, 7586, 21831] * 14))
    put("shard", "truncated", shard(toks)[:-10])
    put("shard", "magic", shard(toks, magic=20240326))
    put("shard", "version", shard(toks, version=2))
    put("shard", "llama3", shard(toks, magic=20240801, version=7, width="I"))
    put("shard", "llama3-version", shard(toks, magic=20240801, version=1, width="I"))
    put("shard", "count", shard(toks, count=-1))
    put("shard", "short", shard(toks[:5]))
    put("shard", "vocab", shard(toks[:40] + [300] + toks[:40]))


def llmc(vocab=16, padded=16, maxt=8, layers=2, heads=2, c=8, magic=20240326, version=3, cut=0):
    n = (padded * c + maxt * c + layers * (2 * c + 3 * c * c + 3 * c + c * c + c + 2 * c + 4 * c * c + 4 * c
                                           + 4 * c * c + c) + 2 * c)
    hdr = struct.pack("<256i", magic, version, maxt, vocab, layers, heads, c, padded, *([0] * 248))
    body = struct.pack("<%df" % n, *[((i * 37) % 101) / 101.0 - 0.5 for i in range(n)])
    data = hdr + body
    return data[:len(data) - cut] if cut else data


def llmcs():
    put("llmc", "valid", llmc())
    put("llmc", "padded", llmc(padded=32, maxt=16))
    put("llmc", "shape", llmc(layers=3))
    put("llmc", "magic", llmc(magic=20240520))
    put("llmc", "bf16", llmc(version=5))
    put("llmc", "truncated", llmc(cut=100))
    put("llmc", "header_only", llmc()[:1024])


def rank_file(rank, world, narrays, ranges, step=7, values=None):
    """a rank file as ckpt.h describes it (data offset right after the table: the reader allows it)"""
    elems = sum(n for _, n in ranges)
    off = 64 + 16 * len(ranges)
    head = b"DTCKPT1\n" + struct.pack("<4I4Q", 1, rank, world, narrays, len(ranges), elems, step, off)
    table = b"".join(struct.pack("<2Q", o, n) for o, n in ranges)
    data = b""
    for a in range(narrays):
        for o, n in ranges:
            data += struct.pack("<%df" % n, *[a * 1000 + o + i + 0.25 for i in range(n)])
    return head + table + data


def ckpts():
    put("ckpt", "one", rank_file(0, 1, 1, [(0, 24)]))
    put("ckpt", "two", rank_file(0, 2, 3, [(0, 10)]) + rank_file(1, 2, 3, [(10, 14)]))
    put("ckpt", "interleaved", rank_file(0, 3, 2, [(0, 4), (12, 4)]) + rank_file(1, 3, 2, [(4, 4), (16, 4)])
        + rank_file(2, 3, 2, [(8, 4), (20, 4)]))
    put("ckpt", "padded", rank_file(0, 1, 1, [(0, 8)])[:64 + 16] + b"\0" * 176 +
        struct.pack("<8f", *range(8)))  # data offset as in the table, but the header says 80: refused
    put("ckpt", "overlap", rank_file(0, 2, 1, [(0, 10)]) + rank_file(1, 2, 1, [(5, 10)]))
    put("ckpt", "gap", rank_file(0, 2, 1, [(0, 10)]) + rank_file(1, 2, 1, [(12, 10)]))
    put("ckpt", "truncated", rank_file(0, 1, 1, [(0, 24)])[:-8])
    put("ckpt", "version", rank_file(0, 1, 1, [(0, 4)]).replace(b"DTCKPT1\n\x01", b"DTCKPT1\n\x02"))


def manifests():
    m = {"format": "dtrun-checkpoint", "version": 1, "step": 200, "opt_steps": 198, "samples": 1600,
         "tokens": 204800, "run_id": "gpt-tiny-4242", "loss": 2.31234, "val_loss": None,
         "config_hash": "3f2a9c0d11aa", "model": "gpt L4 H4 C128 V256 T128", "params": 1208960,
         "optimizer": "adamw", "arrays": 3, "strategy": "zero2", "stage": 2, "world": 2, "precision": "bf16-mixed",
         "restart_count": 1, "saved_at": "2026-01-01T12:00:00.000Z",
         "rng": {"seed": "1234", "streams": "initialisation (seed, tensor), sampler (seed, samples)"},
         "sampler": {"samples": 1600},
         "loss_scaler": {"scale": 65536, "cur_hysteresis": 2, "cur_iter": 198, "last_overflow_iter": -1,
                         "skipped": 0},
         "files": {"rank-00000-of-00002.bin": {"bytes": 7262208, "xxh64": "0123456789abcdef"},
                   "rank-00001-of-00002.bin": {"bytes": 7262208, "xxh64": "fedcba9876543210"}}}
    put("manifest", "valid.json", json.dumps(m))
    put("manifest", "pretty.json", json.dumps(m, indent=2))
    bad = dict(m, version=2)
    put("manifest", "version.json", json.dumps(bad))
    bad = dict(m, files={"../etc/passwd": {"bytes": 1, "xxh64": "0"}})
    put("manifest", "path.json", json.dumps(bad))
    bad = dict(m, arrays=17, world=0)
    put("manifest", "ranges.json", json.dumps(bad))
    bad = dict(m, files={"manifest.json": {"bytes": 10, "xxh64": "0"}})
    put("manifest", "self.json", json.dumps(bad))
    put("manifest", "torn.json", json.dumps(m)[:300])


def webhook():
    now = "Wed, 21 Oct 2015 07:28:00 GMT"
    for name, r in [
        ("200", "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"),
        ("204", "HTTP/1.1 204 No Content\r\n\r\n"),
        ("500", "HTTP/1.1 500 Internal Server Error\r\nContent-Length: 11\r\n\r\nit broke :("),
        ("429_seconds", "HTTP/1.1 429 Too Many Requests\r\nRetry-After: 120\r\nContent-Length: 0\r\n\r\n"),
        ("503_date", "HTTP/1.1 503 Service Unavailable\r\nRetry-After: %s\r\nContent-Length: 4\r\n\r\nbusy" % now),
        ("400_lines", "HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain\r\nContent-Length: 25\r\n\r\n"
                      "bad\nrequest\r\n\x1b[31mred\x1b[0m"),
        ("chunked", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nabcd\r\n0\r\n\r\n"),
        ("chunked_cut", "HTTP/1.1 502 Bad Gateway\r\nTransfer-Encoding: chunked\r\n\r\nfff\r\nabc"),
        ("http10", "HTTP/1.0 408 Request Timeout\r\nRetry-After:   3.5\r\n\r\nslow"),
        ("continue", "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n"),
        ("redirect", "HTTP/1.1 301 Moved Permanently\r\nLocation: http://127.0.0.1:9/x\r\nContent-Length: 0\r\n\r\n"),
        ("long_length", "HTTP/1.1 500 Oops\r\nContent-Length: 999999\r\n\r\nshort"),
        ("garbage", "SSH-2.0-OpenSSH_9.2\r\n"),
        ("empty", ""),
        ("status_999", "HTTP/1.1 999 Whatever\r\nretry-after: -5\r\n\r\n"),
        ("headers_folded", "HTTP/1.1 429 Slow\r\nRetry-After: Wed, 21 Oct\r\n 2015 07:28:00 GMT\r\nX: y\r\n\r\n"),
    ]:
        put("webhook", name, r)


def json_scripts():
    def s(b):
        return bytes([len(b)]) + b
    put("json", "event", b"\x00" + s(b"event") + s(b"step") + b"\x03" + s(b"step") + struct.pack("<q", 200) +
        b"\x02" + s(b"loss") + struct.pack("<d", 2.5) + b"\x06" + s(b"metrics") + b"\x02" + s(b"lr") +
        struct.pack("<d", float("nan")) + b"\x04" + s(b"ok") + b"\x01\x07\x05" + s(b"none"))
    put("json", "strings", b"\x00" + s(b"k\"\\\n") + s("caf\u00e9 \u20ac \U0001F600".encode()) + b"\x09" +
        s(b"\x01\x1f\x7f\xff\xc3(\xe0\x80\x80\xed\xa0\x80\xf4\x90\x80\x80"))
    put("json", "nested", b"".join(b"\x06" + s(b"o%d" % i) for i in range(7)) + b"\x02" + s(b"inf") +
        struct.pack("<d", float("inf")) + b"\x08\x00" + s(b"second") + s(b"doc"))
    put("json", "raw_valid", b'{"a": [1, -0.5e+3, true, null, "\\u00e9\\n"], "b": {}}')
    put("json", "raw_invalid", b'{"a": [1, 01, "\xc0\xaf", .5]}')


def spank():
    put("spank", "full", "dtrun=/opt/dtrun/bin/dtrun\nwebhook=https://hooks.example.org/dtrun?k=1\n"
        "webhook_allow=*.example.org, localhost\nwebhook_secret_file=/etc/slurm/dtrun.key\n"
        "task_failed_timeout=2.5\ngpu_bind=none\nnccl_user_override=no\nNCCL_IB_HCA=mlx5\nNCCL_DEBUG=WARN")
    put("spank", "bad_word", "dtrun\n")
    put("spank", "relative", "dtrun=bin/dtrun")
    put("spank", "url", "webhook=ftp://x.example.org/\n")
    put("spank", "userinfo", "webhook=http://good.example.org@evil.example.com:8080/x\nwebhook_allow=.example.org")
    put("spank", "ipv6", "webhook=http://[::1]:8000/x\nwebhook_allow=::1")
    put("spank", "timeout", "task_failed_timeout=nan\n")
    put("spank", "nccl", "".join("NCCL_X%d=%d\n" % (i, i) for i in range(18)))
    put("spank", "unknown", "colour=blue")


ST_SEP = b"\0--\0"  # fuzz_safetensors.c: between the shards that follow the index


def st_file(tensors, meta=True, raw_header=None, pad=True):
    """a safetensors file: tensors as (name, dtype, shape, data bytes), stored in that order"""
    head, data = ({"__metadata__": {"format": "pt"}} if meta else {}), b""
    for name, dtype, shape, body in tensors:
        head[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(body)]}
        data += body
    text = (raw_header if raw_header is not None else json.dumps(head, separators=(",", ":"))).encode()
    if pad:
        text += b" " * (-len(text) % 8)
    out = struct.pack("<Q", len(text)) + text + data
    # fuzz_safetensors.c reads an input starting with '{' as an index, and splits its shards at ST_SEP
    assert out[0] != ord("{") and ST_SEP not in out, "a seed the target would not read as one file"
    return out


def f32(*v):
    return struct.pack("<%df" % len(v), *v)


def bf16(*v):
    return b"".join(struct.pack("<f", x)[2:] for x in v)  # truncated: exact for these values


def f16(*v):
    return struct.pack("<%de" % len(v), *v)


def safetensors():
    put("safetensors", "f32_2d", st_file([("weight", "F32", [2, 3], f32(0.5, -1, 2, 1e-3, 3.25, -0.0))]))
    put("safetensors", "bf16", st_file([("a", "BF16", [4], bf16(1, -2, 0.5, 256)),
                                        ("b", "BF16", [2, 2], bf16(3, 0, -0.25, 65536))]))
    # ..., a signalling NaN (0x7d01: read back quiet), -0
    put("safetensors", "f16", st_file([("h", "F16", [8], f16(1, -0.5, 65504, 6e-8, float("inf"), 0)
                                        + b"\x01\x7d\x00\x80")]))
    put("safetensors", "scalar", st_file([("step", "F32", [], f32(7))], meta=False))
    put("safetensors", "mixed", st_file([("lm_head.weight", "BF16", [2, 3], bf16(1, 2, 3, 4, 5, 6)),
                                         ("model.embed_tokens.weight", "F16", [1, 2, 1, 2], f16(1, 2, 3, 4)),
                                         ("model.norm.weight", "F32", [0, 3], b""),
                                         ("scale", "F32", [], f32(0.125))]))
    gpt2 = [("wte.weight", "F32", [4, 2], f32(*range(8))), ("wpe.weight", "F32", [2, 2], f32(1, 2, 3, 4)),
            ("h.0.ln_1.weight", "F32", [2], f32(1, 1)), ("h.0.ln_1.bias", "F32", [2], f32(0, 0)),
            ("ln_f.weight", "F32", [2], f32(1, 1))]
    put("safetensors", "gpt2", st_file(gpt2))
    # broken
    valid = st_file([("weight", "F32", [2, 3], f32(*range(6)))])
    put("safetensors", "truncated", valid[:-5])
    put("safetensors", "short", b"\x10\0\0")
    put("safetensors", "empty_header", struct.pack("<Q", 0))
    put("safetensors", "header_past_end", struct.pack("<Q", 4096) + b'{"a":1}')
    put("safetensors", "header_huge", struct.pack("<Q", 1 << 62) + b"{}      ")
    put("safetensors", "not_object", st_file([], raw_header='[1, 2, 3]'))
    put("safetensors", "not_json", st_file([], raw_header='{"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4'))
    put("safetensors", "overlap", st_file([], raw_header=json.dumps(
        {"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
         "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}})) + f32(1, 2, 3))
    put("safetensors", "dtype", st_file([("i", "I64", [1], struct.pack("<q", 5)), ("d", "F64", [1], f32(1, 2))]))
    put("safetensors", "shape_bytes", st_file([], raw_header=json.dumps(
        {"a": {"dtype": "BF16", "shape": [3, 3], "data_offsets": [0, 16]}})) + bytes(16))
    put("safetensors", "five_dims", st_file([("a", "F32", [1, 1, 1, 1, 1], f32(1))]))
    put("safetensors", "offsets", st_file([], raw_header=json.dumps(
        {"a": {"dtype": "F32", "shape": [1], "data_offsets": [8, 4]},
         "b": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]},
         "c": {"dtype": "F32", "shape": ["1"], "data_offsets": [0, 18446744073709551616]}})) + bytes(8))
    put("safetensors", "overflow", st_file([], raw_header=json.dumps(
        {"a": {"dtype": "F32", "shape": [4294967296, 4294967296, 2], "data_offsets": [0, 0]}})))
    put("safetensors", "bytes_overflow", st_file([], raw_header=json.dumps(
        {"a": {"dtype": "F32", "shape": [4611686018427387904], "data_offsets": [0, 0]}})))
    put("safetensors", "entry", st_file([], raw_header='{"__metadata__": {"format": "pt"}, "a": [1], '
                                        '"b": {"dtype": "F32"}}'))
    # sharded: index, NUL, then the shards separated by ST_SEP
    def index(wm):
        return json.dumps({"metadata": {"total_size": 0}, "weight_map": wm}, indent=2).encode()

    s1 = st_file([("h.0.attn.weight", "BF16", [2, 2], bf16(1, 2, 3, 4)), ("wte.weight", "F32", [3], f32(1, 2, 3))])
    s2 = st_file([("h.1.attn.weight", "F16", [2, 2], f16(1, 2, 3, 4)), ("ln_f.weight", "F32", [], f32(1))])
    n1, n2 = "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"
    wm = {"h.0.attn.weight": n1, "wte.weight": n1, "h.1.attn.weight": n2, "ln_f.weight": n2}
    put("safetensors", "index", index(wm) + b"\0" + s1 + ST_SEP + s2)
    one = "model-00001-of-00001.safetensors"
    put("safetensors", "index_one", index({"wte.weight": one, "h.0.attn.weight": one}) + b"\0" + s1)
    put("safetensors", "index_missing", index(dict(wm, **{"lm_head.weight": "model-00003-of-00003.safetensors"}))
        + b"\0" + s1 + ST_SEP + s2)
    put("safetensors", "index_wrong_shard", index(dict(wm, **{"wte.weight": n2})) + b"\0" + s1 + ST_SEP + s2)
    put("safetensors", "index_twice", index(wm) + b"\0" + s1 + ST_SEP + s1)
    put("safetensors", "index_unlisted", index({"wte.weight": n1}) + b"\0" + s1 + ST_SEP + s2)
    put("safetensors", "index_no_map", b'{"metadata": {"total_size": 0}, "weight_map": [1]}\0' + s1)
    put("safetensors", "index_no_name", index({"wte.weight": {"file": n1}, "h.0.attn.weight": ""}) + b"\0" + s1)
    put("safetensors", "index_self", index({"wte.weight": "model.safetensors.index.json"}) + b"\0" + s1)
    put("safetensors", "index_dir", index({"wte.weight": ".."}) + b"\0" + s1)


def dict_file(target, words):
    """libFuzzer's -dict: one quoted token a line (scripts/fuzz passes it when it exists)"""
    with open(os.path.join(TOP, "tests", "fuzz", target + ".dict"), "w") as f:
        f.write("# tokens for fuzz_%s (tests/fuzz/make_seeds.py writes this file)\n" % target)
        for w in sorted(set(words)):
            esc = "".join("\\\\" if c == "\\" else '\\"' if c == '"' else c if " " <= c <= "~" else "\\x%02X" % ord(c)
                          for c in w)
            f.write('"%s"\n' % esc)


def dicts():
    src = open(os.path.join(TOP, "src", "config", "config_schema.c")).read()
    paths = re.findall(r'^\s+[A-Z]+\("([a-z_.0-9]+)"', src, re.M)
    names = re.findall(r'\{"([A-Za-z0-9_.-]+)", -?[A-Z_0-9]+', src)
    parts = {p for path in paths for p in path.split(".")}
    units = ["ba", "ep", "sp", "tok", "dur", "sec", "min", "h", "s", "ms", "m", "d", "K", "M", "B", "T", "auto",
             "null", "~", "true", "false", "1e-3", "-1", "0", "0.5", "99999999999999999999", "nan", ".inf"]
    yaml = [": ", "\n  ", "- ", "[", "]", "{", "}", ", ", "&a ", "*a", "<<: ", "!!str ", "'", "\"", "# ", "---\n",
            "|\n", ">\n"]
    dict_file("config", [p + ":" for p in parts] + names + units + yaml)
    dict_file("overrides", [p + "=" for p in paths] + names + units + ["[", "]", "{", "}", ", ", "\n"])
    ds = open(os.path.join(TOP, "src", "config", "deepspeed.c")).read()
    dsp = re.findall(r'^\s+[A-Z]+\("([a-z_.0-9]+)"', ds, re.M)
    dsw = {'"%s":' % p for path in dsp for p in path.split(".")}
    dict_file("deepspeed", sorted(dsw) + ['"auto"', "true", "false", "null", "{", "}", "[", "]", '"cpu"', '"none"',
                                          '"AdamW"', '"Adam"', '"WarmupLR"', '"WarmupDecayLR"', '"WarmupCosineLR"',
                                          "1e-4", "0.9", "-1", "65536", "1e309"])
    dict_file("webhook", ["HTTP/1.1 ", "HTTP/1.0 ", "HTTP/2 ", " 200 OK", " 429 ", " 500 ", " 503 ", " 408 ", " 100 ",
                          " 301 ", "\r\n", "\r\n\r\n", "Retry-After: ", "Content-Length: ", "Transfer-Encoding: chunked",
                          "Connection: close", "Location: ", " GMT", "Wed, 21 Oct 2015 07:28:00", "Sun, 06 Nov 2094",
                          "0\r\n\r\n", "Content-Encoding: gzip", "Set-Cookie: a=b", "\t"])
    dict_file("spank", ["dtrun=/", "webhook=http://", "webhook=https://", "webhook_allow=", "webhook_secret_file=/",
                        "task_failed_timeout=", "gpu_bind=auto", "gpu_bind=none", "nccl_user_override=yes",
                        "nccl_user_override=no", "NCCL_", "@", "[::1]", ":8080", "%25", "*.", ".example.org", "\\",
                        "#", "?", "/"])
    dict_file("manifest", ['"%s":' % k for k in ("format", "version", "step", "opt_steps", "samples", "tokens",
                                                 "run_id", "loss", "val_loss", "config_hash", "model", "params",
                                                 "optimizer", "arrays", "strategy", "stage", "world", "precision",
                                                 "restart_count", "saved_at", "rng", "seed", "streams", "sampler",
                                                 "loss_scaler", "scale", "cur_hysteresis", "cur_iter",
                                                 "last_overflow_iter", "skipped", "files", "bytes", "xxh64")]
              + ['"dtrun-checkpoint"', "null", "-1", "1e400", '"rank-00000-of-00001.bin"', '"manifest.json"', "{", "}"])
    safetensors_dict()


def safetensors_dict():
    dict_file("safetensors", ['"%s"' % k for k in ("__metadata__", "format", "pt", "dtype", "shape", "data_offsets",
                                                    "F32", "BF16", "F16", "F64", "I64", "U8", "metadata",
                                                    "total_size", "weight_map", "model-00001-of-00002.safetensors",
                                                    "model-00002-of-00002.safetensors",
                                                    "model-00001-of-00003.safetensors", "model.safetensors")]
              + ["{", "}", "[", "]", ",", ":", "[]", "0", "1", "-1", "4294967296", "18446744073709551615",
                 "18446744073709551616", "1e3", "null", "&a ", "*a", ST_SEP.decode("latin-1"), "\0" * 7,
                 "\x08\0\0\0\0\0\0\0", "\xff\xff\xff\xff\xff\xff\xff\x7f", "\x00\x7f", "\x00\x80", "\x01\x7c",
                 "\x00\x7c"])


if __name__ == "__main__":
    shutil.rmtree(OUT, ignore_errors=True)
    os.makedirs(os.path.join(OUT, "config"))
    os.makedirs(os.path.join(OUT, "deepspeed"))
    config()
    deepspeed()
    overrides()
    timestr()
    precision()
    shards()
    llmcs()
    ckpts()
    manifests()
    webhook()
    json_scripts()
    spank()
    safetensors()
    dicts()
