#!/usr/bin/env bash
# Data: `dtrun prepare` makes llm.c shards a run trains on; every bad shard is
# refused before training (exit 3, the file, the byte offset, what to do): the
# events say run_failed, with that message, and no step.
. "$(dirname "$0")/tap.sh"
cd "$TMP" || exit 1
tiny=(model.n_layer=1 model.n_embd=32 model.n_head=2 model.seq_len=16 data.micro_batch_size=4 events.interval=5ba)

for i in $(seq 1 200); do echo "line $i: the quick brown fox jumps over the lazy dog"; done >corpus.txt
run "prepare" 0 "$DTRUN" prepare corpus.txt --out data --val-fraction 0.1
same "prepare: what it wrote" "$err" "dtrun: prepare: 9623 training and 1069 validation tokens (bytes) in data, shard version 1 (uint16 tokens); train with data.train=data/train_*.bin data.val=data/val_*.bin model.vocab_size=256"
same "prepare: llm.c header" "$(od -An -t d4 -N 12 data/train_000000.bin | tr -s ' ')" " 20240520 1 9623"

run "train on prepared shards" 0 "$DTRUN" run "${tiny[@]}" run.max_duration=10ba run.eval_interval=5ba \
    data.train='data/train_*.bin' data.val='data/val_*.bin' run.dir=ok
has "train: validation ran" "$err" "dtrun: step 10: validation loss"
same "events: one metrics record per events.interval (5ba)" "$(grep -c '"type":"metrics"' ok/events.jsonl)" "2"
same "events: two validations" "$(grep -c '"type":"eval"' ok/events.jsonl)" "2"
has "events: the metrics record" "$(grep '"type":"metrics"' ok/events.jsonl | tail -1)" '"step":10,"steps":10,"epoch":0,"tokens":640,"samples":40,"loss":'
for k in lr grad_norm tokens_per_s step_ms; do
    has "events: metrics carry $k" "$(grep -m1 '"type":"metrics"' ok/events.jsonl)" "\"$k\":"
done

bad() { # NAME SHARD EXPECTED_STDERR [overrides...]
    local name=$1 shard=$2 want=$3
    shift 3
    rm -rf bad
    run "$name" 3 "$DTRUN" run "${tiny[@]}" data.train="$shard" run.dir="bad" "$@"
    same "$name: message" "$err" "$want"
    same "$name: nothing trained, the failure reported" "$(sed 's/.*"type":"\([a-z_]*\)".*"step":\([a-z0-9]*\).*/\1 \2/' bad/events.jsonl)" \
        "run_failed null"
}

cp data/train_000000.bin magic.bin
printf '\x39\x30\x00\x00' | dd of=magic.bin bs=1 seek=0 conv=notrunc status=none
bad "wrong magic" magic.bin "magic.bin: error: not an llm.c token shard: magic 12345 at byte 0, expected 20240520 (uint16 tokens) or 20240801 (uint32 tokens)
  hint: make shards with \`dtrun prepare TEXT... --out DIR\` or llm.c's dev/data scripts"

cp data/train_000000.bin version.bin
printf '\x03' | dd of=version.bin bs=1 seek=4 conv=notrunc status=none
bad "wrong version" version.bin "version.bin: error: shard version 3 at byte 4 after magic 20240520, which llm.c writes with version 1
  hint: make shards with \`dtrun prepare TEXT... --out DIR\` or llm.c's dev/data scripts"

cp data/train_000000.bin cut.bin
truncate -s 5000 cut.bin
bad "truncated shard" cut.bin "cut.bin: error: truncated: the header (byte 8) says 9623 tokens, 20270 bytes in all, but the file has 5000 bytes
  hint: the shard was cut off while being written or copied; make it again"

head -c 1023 data/train_000000.bin >header.bin
bad "truncated header" header.bin "header.bin: error: truncated: 1023 bytes, shorter than the 1024-byte shard header
  hint: make shards with \`dtrun prepare TEXT... --out DIR\` or llm.c's dev/data scripts"

bad "token beyond the vocabulary" data/train_000000.bin "data/train_000000.bin: error: token 108 at byte 1024 (token 0) is not below model.vocab_size 100
  hint: set model.vocab_size to the tokenizer's size (50257 for GPT-2, 128256 for Llama 3), or re-make the shard" model.vocab_size=100

# uint32 tokens (#30), written as llm.c's data_common.py writes a Llama 3 shard (magic 20240801,
# version 7): tokens
# past 65535 train, and the same checks count 4-byte tokens
mkdir -p llama3
/usr/bin/python3 -c '
import array, random, sys
r = random.Random(3)
tok = array.array("I", [r.randrange(65536, 70000) for _ in range(2000)])
tok[0] = 69999
hdr = array.array("i", [20240801, 7, len(tok)] + [0] * 253)
assert hdr.itemsize == 4 and tok.itemsize == 4 and sys.byteorder == "little"
open("llama3/train_000000.bin", "wb").write(hdr.tobytes() + tok.tobytes())'
run "train on a Llama 3 shard" 0 "$DTRUN" run "${tiny[@]}" run.max_duration=4ba model.vocab_size=70000 \
    data.train='llama3/train_*.bin' run.dir=v2
has "uint32 shard: all 124 sequences" "$err" "1 shard, 124 sequences"
has "uint32 shard: trained" "$err" "dtrun: done: 4 steps, loss"
bad "uint32 shard: token beyond the vocabulary" llama3/train_000000.bin "llama3/train_000000.bin: error: token 69999 at byte 1024 (token 0) is not below model.vocab_size 69999
  hint: set model.vocab_size to the tokenizer's size (50257 for GPT-2, 128256 for Llama 3), or re-make the shard" model.vocab_size=69999
head -c 5000 llama3/train_000000.bin >llama3-cut.bin
bad "uint32 shard: truncated" llama3-cut.bin "llama3-cut.bin: error: truncated: the header (byte 8) says 2000 tokens, 9024 bytes in all, but the file has 5000 bytes
  hint: the shard was cut off while being written or copied; make it again" model.vocab_size=70000

printf 'tiny' >tiny.txt
"$DTRUN" prepare tiny.txt --out small --val-fraction 0 2>/dev/null
bad "shard shorter than one sequence" small/train_000000.bin "small/train_000000.bin: error: the shard holds 4 tokens, fewer than one sequence (model.seq_len + 1 = 17)
  hint: lower model.seq_len, or make larger shards"

bad "empty data glob" 'nothing/here_*.bin' "data.train: error: 'nothing/here_*.bin' matches no file
  hint: check the path (relative to the current directory), or make shards with \`dtrun prepare TEXT... --out DIR\`"
finish
