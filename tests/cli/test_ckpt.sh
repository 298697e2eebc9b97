#!/usr/bin/env bash
# Checkpoints (issue #12): a save is a directory step-<N>/ of one file per rank plus a manifest,
# written atomically (0640, the manifest last, `latest` replaced), the keep newest kept; a run
# killed at any moment (a rank, the whole job, halfway through a save) resumes from the newest
# valid checkpoint and ends with the uninterrupted run's loss, bitwise on the same world (20 kills at
# random moments: test_ckpt_kills.sh); a
# checkpoint written by one strategy and world continues under another; a corrupt, truncated,
# incomplete or foreign checkpoint is named and skipped (or refused when asked for by path); a
# full or unwritable disk is reported and loses nothing; SIGTERM saves, stops and resumes; the
# checkpoint exports to llm.c (read back by model.init_from with the same loss) and to Hugging
# Face safetensors (read by the format's definition into the PyTorch reference: the same loss).
. "$(dirname "$0")/tap.sh"
cd "$TMP" || exit 1
trap 'kill -9 $(jobs -p) 2>/dev/null; umount -l "$TMP/small" "$TMP/ro" 2>/dev/null; rm -rf "$TMP"' EXIT
PY=/usr/bin/python3
CHECK=$DT_SRCDIR/tests/ckpt_check.py
export OMP_NUM_THREADS=1 # bitwise comparisons: the same threads in every life
tiny=(model.n_layer=2 model.n_embd=32 model.n_head=2 model.seq_len=16 data.micro_batch_size=4 run.eval_interval=0ba
    events.interval=1ba scheduler.type=constant optimizer.lr=3e-3)
compare() { $PY "$CHECK" compare "$1/events.jsonl" "$2/events.jsonl" "$3" "$4"; }
mpi=0
dtrun_has '^comm: mpi' && mpi=1
full=0
optimized && full=1

# ---- the layout of a save
run "20 steps, a checkpoint every 5, keep 2" 0 "$DTRUN" run "${tiny[@]}" run.max_duration=20ba \
    checkpoint.interval=5ba checkpoint.keep=2 run.dir=a
same "the two newest are kept, and latest" "$(ls a/ckpt | tr '\n' ' ')" "latest step-00000015 step-00000020 "
same "latest names the newest" "$(cat a/ckpt/latest)" "step-00000020"
same "one file per rank and the manifest" "$(ls a/ckpt/step-00000020 | tr '\n' ' ')" \
    "manifest.json rank-00000-of-00001.bin "
same "files are 0640" "$(stat -c %a a/ckpt/step-00000020/* | sort -u | tr '\n' ' ')" "640 "
same "the manifest says what the run was" "$($PY -c "
import json; m = json.load(open('a/ckpt/step-00000020/manifest.json'))
print(m['format'], m['version'], m['step'], m['samples'], m['tokens'], m['world'], m['strategy'], m['arrays'],
      m['model'], sorted(m['files']), sorted(m['files']['rank-00000-of-00001.bin']), sorted(m['loss_scaler']),
      m['run_id'] == json.loads(open('a/events.jsonl').readline())['run_id'])")" \
    "dtrun-checkpoint 1 20 80 1280 1 single 3 gpt n_layer=2 n_head=2 n_embd=32 vocab_size=256 seq_len=16 ['rank-00000-of-00001.bin'] ['bytes', 'xxh64'] ['cur_hysteresis', 'cur_iter', 'last_overflow_iter', 'scale', 'skipped'] True"
same "checkpoint_saved at 5, 10, 15, 20" "$(grep -o '"type":"checkpoint_saved","time":"[^"]*",[^}]*"step":[0-9]*' a/events.jsonl | sed 's/.*"step"://' | tr '\n' ' ')" "5 10 15 20 "
has "... with bytes, seconds and MB/s" "$(grep checkpoint_saved a/events.jsonl | tail -1)" '"path":"a/ckpt/step-00000020","bytes":'
run "events.jsonl is valid against the schema" 0 $PY "$DT_SRCDIR/tests/validate_events.py" \
    "$DT_SRCDIR/src/events/events.schema.json" a/events.jsonl
run "dtrun ckpt inspect a checkpoint.dir" 0 "$DTRUN" ckpt inspect a/ckpt
has "... checks the newest and describes it" "$out" "a/ckpt/step-00000020: a valid dtrun checkpoint (format version 1; every file's size and xxh64 checked)
  step 20 (optimizer steps 20), 80 samples, 1280 tokens"
run "the same command again" 0 "$DTRUN" run "${tiny[@]}" run.max_duration=20ba checkpoint.interval=5ba \
    checkpoint.keep=2 run.dir=a
has "... finds the run complete" "$err" "the run is complete: a/ckpt/step-00000020 holds step 20 of 20; nothing to train"
has "... and says that nothing was trained" "$err" "dtrun: done: nothing trained: the run was complete at step 20 (loss "
has "... not as a speed" "$(grep -c 'tokens/s' <<<"$err")" 0
run "the same run again with another seed and weight decay" 0 "$DTRUN" run "${tiny[@]}" run.max_duration=20ba \
    checkpoint.interval=5ba checkpoint.keep=2 run.dir=a optimizer.weight_decay=0.05 run.seed=7
has "... says the config differs, key by key" "$err" "the run is complete: a/ckpt/step-00000020 holds step 20 of 20, trained with a config other than this one (run.seed: 1234 there, 7 here; optimizer.weight_decay: 0.1 there, 0.05 here); nothing to train
  hint: raise run.max_duration to go on with this config, or set checkpoint.resume: none (or another run.dir) to train it afresh"
has "... as a resume does" "$err" "resuming with a config other than the one that wrote a/ckpt/step-00000020: run.seed: 1234 there, 7 here; optimizer.weight_decay: 0.1 there, 0.05 here"
run "checkpoint.dir: null saves nothing" 0 "$DTRUN" run "${tiny[@]}" run.max_duration=3ba checkpoint.dir=null run.dir=n0
[ ! -e n0/ckpt ] && ok "... no ckpt directory" || not_ok "n0/ckpt exists"

# ---- what a user has at hand names a checkpoint: a step directory, a checkpoint.dir, its latest file, a run.dir
for arg in a/ckpt/step-00000020 a/ckpt a/ckpt/latest a; do
    run "dtrun ckpt inspect $arg" 0 "$DTRUN" ckpt inspect $arg
    has "... describes step 20" "$out" "a/ckpt/step-00000020: a valid dtrun checkpoint"
done
run "dtrun ckpt inspect a/ckpt/latest" 0 "$DTRUN" ckpt inspect a/ckpt/latest
same "... says which it took" "$err" "dtrun: ckpt: a/ckpt/latest names a/ckpt/step-00000020: step 20"
run "dtrun ckpt export a/ckpt/latest" 0 "$DTRUN" ckpt export a/ckpt/latest --format safetensors --out hf-latest
has "... exports step 20" "$out" "hf-latest: safetensors and config.json (GPT2LMHeadModel) of step 20"
run "dtrun ckpt export a (the run.dir)" 0 "$DTRUN" ckpt export a --format llmc --out run-dir.bin
same "... says which it took" "$err" "dtrun: ckpt: a is a run.dir: its checkpoint.dir a/ckpt holds the newest valid checkpoint a/ckpt/step-00000020"
has "... exports step 20" "$out" "run-dir.bin: llm.c model file (version 3) of step 20"
run "dtrun ckpt consolidate a/ckpt" 0 "$DTRUN" ckpt consolidate a/ckpt cons
same "... says which it took" "$err" "dtrun: ckpt: a/ckpt: its newest valid checkpoint is a/ckpt/step-00000020"
run "a run whose checkpoint.dir is elsewhere" 0 "$DTRUN" run "${tiny[@]}" run.max_duration=5ba run.dir=o \
    checkpoint.dir="$TMP/elsewhere"
run "... inspected by its run.dir" 0 "$DTRUN" ckpt inspect o
has "... finds it there" "$out" "$TMP/elsewhere/step-00000005: a valid dtrun checkpoint"
run "a run.dir whose run saved nothing" 5 "$DTRUN" ckpt inspect n0
has "... says so" "$err" "n0: error: this run saved no checkpoints (checkpoint.dir: null in n0/config.yaml)"
mkdir -p m/ckpt && cp a/config.yaml m/
run "a run.dir with an empty checkpoint.dir" 5 "$DTRUN" ckpt export m --format llmc --out m.bin
same "... says what it looked for, and where" "$(head -1 <<<"$err")" "m: error: no valid checkpoint here: looked for step-<N>/manifest.json in m/ckpt (the checkpoint.dir of run.dir m, from its config.yaml) and found none"
printf 'nonsense\n' >notlatest
run "a file that names no checkpoint" 2 "$DTRUN" ckpt inspect notlatest
has "... says what a latest file holds" "$err" "notlatest: error: this file names no checkpoint (a checkpoint.dir's latest holds one line, step-<N>)"
run "a path that does not exist" 2 "$DTRUN" ckpt inspect nowhere
same "... says so, and what to give" "$err" "nowhere: error: No such file or directory
  hint: give a checkpoint (step-<N>/), a checkpoint.dir, its latest file, or a run.dir"

# ---- exact resume, one rank: killed at step 13, resumed from step 10
run "uninterrupted, 20 steps" 0 "$DTRUN" run "${tiny[@]}" run.max_duration=20ba checkpoint.interval=5ba run.dir=u
DTRUN_FAULT=kill@13 run "killed as step 13 starts" 137 "$DTRUN" run "${tiny[@]}" run.max_duration=20ba \
    checkpoint.interval=5ba run.dir=k
run "the same command" 0 "$DTRUN" run "${tiny[@]}" run.max_duration=20ba checkpoint.interval=5ba run.dir=k
# the save of step 10 may still be on its way to disk when step 13 starts: then step 5 is the newest
from=$(sed -n 's/.*resuming from k\/ckpt\/step-0*\([0-9]*\): step .*/\1/p' <<<"$err")
case $from in 5 | 10) ok "... resumes from the newest checkpoint (step $from)" ;; *) not_ok "resumed from '$from'" "$err" ;; esac
same "... the losses after it are the uninterrupted run's, bitwise" "$(compare k u $((from + 1)) 20)" bitwise
same "... one run id across both starts" "$(grep -o '"type":"run_started","time":"[^"]*","run_id":"[0-9a-f]*"' k/events.jsonl | sed 's/.*run_id//' | sort -u | wc -l)" 1
same "... every event id unique" "$(grep -o '"id":"[^"]*"' k/events.jsonl | sort | uniq -d | wc -l)" 0
has "... run_started says where it resumed from" "$(grep run_started k/events.jsonl | tail -1)" \
    "\"resumed\":{\"path\":\"k/ckpt/step-$(printf %08d "$from")\",\"step\":$from}"

# ---- SIGTERM (Slurm's time limit) and SIGINT: save at a step boundary, stop, resume
"$DTRUN" run "${tiny[@]}" run.max_duration=100000ba run.dir=t >t.out 2>t.err &
job=$!
for _ in $(seq 600); do grep -q '"step":3,' t/events.jsonl 2>/dev/null && break; sleep 0.05; done
kill -TERM $job
kill -TERM $job # a second signal while it saves changes nothing
wait $job
same "SIGTERM: exit 75" "$?" 75
stopped=$(sed -n 's/.*stopped by SIGTERM after step \([0-9]*\);.*/\1/p' t.err)
has "... says where the state is and how to go on" "$(cat t.err)" "dtrun: stopped by SIGTERM after step $stopped; its state is saved in t/ckpt/step-$(printf %08d "$stopped")
  hint: run the same command again to resume (checkpoint.resume: auto)"
has "... preempted in the events" "$(tail -1 t/events.jsonl)" "\"type\":\"preempted\""
has "... with the step, the signal, and that it was saved" "$(tail -1 t/events.jsonl)" "\"step\":$stopped,\"signal\":\"SIGTERM\",\"checkpointed\":true"
run "... the checkpoint is whole" 0 "$DTRUN" ckpt inspect "t/ckpt/step-$(printf %08d "$stopped")"
end=$((stopped + 5))
run "... resumed to step $end" 0 "$DTRUN" run "${tiny[@]}" run.max_duration=${end}ba run.dir=t
run "... uninterrupted to step $end" 0 "$DTRUN" run "${tiny[@]}" run.max_duration=${end}ba run.dir=tu
same "... the same losses after the stop" "$(compare t tu $((stopped + 1)) $end)" bitwise

# ---- wall-clock intervals: 100 steps of at least 10 ms each (DTRUN_FAULT=slow), so a second or more of
# training however fast the machine, and a save every 0.3 s of it
DTRUN_FAULT=slow@1 run "checkpoint.interval 0.3sec" 0 "$DTRUN" run "${tiny[@]}" run.max_duration=100ba \
    checkpoint.interval=0.3sec events.interval=10ba checkpoint.keep=0 run.dir=w
n=$(grep -c '"type":"checkpoint_saved"' w/events.jsonl)
[ "$n" -ge 3 ] && ok "... saves on the clock as well as at the end ($n saves)" || not_ok "only $n saves"

# ---- bad input: each named, nothing lost, auto-resume falls back
cp -r a bad && rm -f bad/dtrun.lock
file=bad/ckpt/step-00000020/rank-00000-of-00001.bin
printf '\x01' | dd of=$file bs=1 seek=5000 conv=notrunc 2>/dev/null
run "a flipped byte: auto-resume" 0 "$DTRUN" run "${tiny[@]}" run.max_duration=20ba run.dir=bad checkpoint.keep=0
has "... names the file and the checksum" "$err" "dtrun: warning: checkpoint.resume auto: skipping bad/ckpt/step-00000020, not a valid checkpoint: bad/ckpt/step-00000020/rank-00000-of-00001.bin: error: checksum mismatch (xxh64 "
has "... and falls back to the one before" "$err" "resuming from bad/ckpt/step-00000015: step 15"
cp -r a/ckpt/step-00000020 flipped
printf '\x01' | dd of=flipped/rank-00000-of-00001.bin bs=1 seek=5000 conv=notrunc 2>/dev/null
run "a flipped byte, resume: PATH" 5 "$DTRUN" run "${tiny[@]}" run.dir=bad3 checkpoint.resume=flipped
has "... refused, naming the file" "$err" "flipped/rank-00000-of-00001.bin: error: checksum mismatch (xxh64 "
cp -r a/ckpt/step-00000020 trunc
truncate -s -100 trunc/rank-00000-of-00001.bin
run "a truncated file" 5 "$DTRUN" run "${tiny[@]}" run.dir=bad4 checkpoint.resume=trunc
has "... is named" "$err" "trunc/rank-00000-of-00001.bin: error: $(($(stat -c %s a/ckpt/step-00000020/rank-00000-of-00001.bin) - 100)) bytes, the manifest says $(stat -c %s a/ckpt/step-00000020/rank-00000-of-00001.bin): the file is truncated"
cp -r a/ckpt/step-00000020 nomanifest
rm nomanifest/manifest.json
run "a missing manifest" 5 "$DTRUN" run "${tiny[@]}" run.dir=bad5 checkpoint.resume=nomanifest
has "... is not a checkpoint" "$err" "nomanifest/manifest.json: error: the manifest cannot be read, so this is not a checkpoint"
cp -r a/ckpt/step-00000020 nofile
rm nofile/rank-00000-of-00001.bin
run "a missing rank file" 5 "$DTRUN" run "${tiny[@]}" run.dir=bad6 checkpoint.resume=nofile
has "... is named" "$err" "nofile/rank-00000-of-00001.bin: error: the file is missing: the checkpoint is incomplete"
printf '{"format": "dtrun-checkpoint", "version": 1, "step": ' >halfmanifest.json
cp -r a/ckpt/step-00000020 half && cp halfmanifest.json half/manifest.json
run "an unreadable manifest" 5 "$DTRUN" run "${tiny[@]}" run.dir=bad7 checkpoint.resume=half
has "... is named" "$err" "half/manifest.json: error: the manifest cannot be read, so this is not a checkpoint ("
run "a checkpoint of another model shape" 5 "$DTRUN" run "${tiny[@]}" model.n_embd=64 run.dir=bad8 \
    checkpoint.resume=a/ckpt/step-00000020
has "... says both shapes" "$err" "a/ckpt/step-00000020: error: this checkpoint holds a model of another shape (gpt n_layer=2 n_head=2 n_embd=32 vocab_size=256 seq_len=16); this config builds gpt n_layer=2 n_head=2 n_embd=64 vocab_size=256 seq_len=16"
mkdir stale && cp -r a/ckpt/step-00000020 stale/step-00000030 && rm stale/step-00000030/manifest.json
mkdir stale/step-00000040.partial-0badc0de && cp a/ckpt/step-00000020/manifest.json stale/step-00000040.partial-0badc0de/
cp -r a/ckpt/step-00000015 stale/
run "a checkpoint.dir with a torn save and a stray partial" 0 "$DTRUN" run "${tiny[@]}" run.max_duration=20ba \
    checkpoint.dir="$TMP/stale" checkpoint.keep=0 run.dir=bad9
has "... skips the torn one by name" "$err" "skipping $TMP/stale/step-00000030, not a valid checkpoint: $TMP/stale/step-00000030/manifest.json: error: the manifest cannot be read"
has "... resumes from the valid one" "$err" "resuming from $TMP/stale/step-00000015: step 15"
[ ! -e stale/step-00000040.partial-0badc0de ] && ok "... and its first commit removes the stray partial" ||
    not_ok "stale/step-00000040.partial-0badc0de left"
cp -r a/ckpt sup
run "checkpoint.resume none over another run's checkpoints (keep 2)" 0 "$DTRUN" run "${tiny[@]}" run.max_duration=10ba \
    checkpoint.interval=5ba checkpoint.keep=2 checkpoint.dir="$TMP/sup" checkpoint.resume=none run.dir=supr
has "... they are renamed out of auto-resume's way, by name, not deleted" "$err" "$TMP/sup: step-00000020, step-00000015 renamed to *.superseded-"
same "... and this run's saves are kept" "$(ls sup | grep -v superseded | tr '\n' ' ')" "latest step-00000005 step-00000010 "
same "... latest is this run's" "$(cat sup/latest)" step-00000010
touch notadir
run "checkpoint.dir that cannot be made" 5 "$DTRUN" run "${tiny[@]}" run.max_duration=3ba run.dir=bad10 \
    checkpoint.dir="$TMP/notadir/ckpt"
has "... is refused at start, by name" "$err" "$TMP/notadir/ckpt: error: cannot create the directory: Not a directory (checkpoint.dir)"
same "... before any step" "$(grep -c '"type":"metrics"' bad10/events.jsonl 2>/dev/null || echo 0)" 0
DTRUN_FAULT=enospc@10 run "a full disk at step 10 (DTRUN_FAULT=enospc)" 0 "$DTRUN" run "${tiny[@]}" \
    run.max_duration=15ba checkpoint.interval=5ba checkpoint.keep=0 run.dir=full
has "... is said, naming the file, and training goes on" "$err" "dtrun: warning: checkpoint of step 10 failed, rank 0: full/ckpt/step-00000010.partial-"
has "... with the hint" "$err" "/rank-00000-of-00001.bin.tmp: error: writing the checkpoint failed: No space left on device
  hint: the disk (or your quota) is full: free space, or point checkpoint.dir elsewhere"
has "... checkpoint_failed in the events" "$(grep checkpoint_failed full/events.jsonl)" '"step":10,"path":"full/ckpt/step-00000010","error":"rank 0: full/ckpt/step-00000010.partial-'
same "... the saves before and after stand" "$(ls full/ckpt | tr '\n' ' ')" "latest step-00000005 step-00000015 "
size=$(stat -c %s a/ckpt/step-00000020/rank-00000-of-00001.bin)
if mkdir small ro && mount -t tmpfs -o size=$((size * 3 / 2 / 1024 + 8))k tmpfs small 2>/dev/null &&
    mount -t tmpfs -o ro,size=64k tmpfs ro; then
    run "a real full disk (a tmpfs with room for one save and a half)" 5 "$DTRUN" run "${tiny[@]}" \
        run.max_duration=10ba checkpoint.interval=5ba checkpoint.dir="$TMP/small" run.dir=tmpfs
    has "... the last save fails, by name" "$err" "checkpoint of step 10 failed, rank 0: $TMP/small/step-00000010.partial-"
    has "... and ends the run (exit 5)" "$err" "No space left on device
  hint: the disk (or your quota) is full: free space, or point checkpoint.dir elsewhere"
    run "... what was saved is intact" 0 "$DTRUN" ckpt inspect "$TMP/small"
    has "... and is the one a restart takes" "$out" "$TMP/small/step-00000005: a valid dtrun checkpoint"
    run "a read-only checkpoint.dir" 5 "$DTRUN" run "${tiny[@]}" run.max_duration=3ba checkpoint.dir="$TMP/ro" \
        run.dir=rodir
    has "... is refused at start" "$err" "$TMP/ro: error: checkpoint.dir is not writable: Read-only file system"
else
    ok "# SKIP tmpfs cannot be mounted here (not root?): the full disk is DTRUN_FAULT=enospc's above"
fi

# ---- export: llm.c both ways, Hugging Face safetensors against the PyTorch reference
for i in $(seq 300); do echo "the quick brown fox $i jumps over the lazy dog; pack my box with $((i * 7)) jugs."; done >text.txt
run "dtrun prepare" 0 "$DTRUN" prepare text.txt --out data
text=("${tiny[@]}" data.train="data/train_*.bin" data.val="data/val_*.bin" data.eval_batches=2 run.eval_interval=10ba)
run "train on text, validating at the end" 0 "$DTRUN" run "${text[@]}" run.max_duration=10ba run.dir=x
val=$(grep '"type":"eval"' x/events.jsonl | tail -1 | sed 's/.*"val_loss":\([0-9.e+-]*\).*/\1/')
run "export --format llmc" 0 "$DTRUN" ckpt export x/ckpt --format llmc --out model.bin
has "... says what it wrote" "$out" "model.bin: llm.c model file (version 3) of step 10"
same "... llm.c's header: magic, version, seq_len, vocab, layers, heads, channels, padded vocab" \
    "$(od -An -t d4 -N 32 model.bin | tr -s ' ' | sed 's/^ //' | tr '\n' ' ')" "20240326 3 16 256 2 2 32 256 "
# lr 1e-30 moves no fp32 weight: validation after step 1 sees the exported weights
run "model.init_from the export, validating after one step of lr 1e-30" 0 "$DTRUN" run "${text[@]}" \
    model.init_from=model.bin optimizer.lr=1e-30 run.max_duration=1ba run.eval_interval=1ba run.dir=y
same "... the same validation loss as the run that wrote it" \
    "$(grep '"type":"eval"' y/events.jsonl | tail -1 | sed 's/.*"val_loss":\([0-9.e+-]*\).*/\1/')" "$val"
run "export --format safetensors" 0 "$DTRUN" ckpt export x/ckpt --format safetensors --out hf
same "... model.safetensors and config.json" "$(ls hf | tr '\n' ' ')" "config.json model.safetensors "
run "... read by the format's definition into the PyTorch reference" 0 $PY "$CHECK" safetensors hf \
    "$(ls data/val_*.bin | head -1)" 16 4 2
d=$(awk -v a="$out" -v b="$val" 'BEGIN { d = (a - b) / b; printf "%.2e", d < 0 ? -d : d }')
within "$d" 1e-5 && ok "... its loss is dtrun's validation loss ($out vs $val)" || not_ok "PyTorch $out, dtrun $val"
run "export of an unknown format" 2 "$DTRUN" ckpt export x/ckpt --format onnx --out m.onnx
has "... names the ones there are" "$err" "dtrun ckpt export: error: --format 'onnx': use llmc (llm.c's model file) or safetensors (a Hugging Face model directory)"
run "inspect a directory without checkpoints" 5 "$DTRUN" ckpt inspect data
has "... says so" "$err" "data: error: no valid checkpoint here"

if [ $mpi = 0 ]; then
    ok "# SKIP no MPI in this build: multi-rank checkpoints"
    finish
fi
# skipped_steps RUN_DIR STEP: at that step (its last record: a resumed run's events hold the killed run's too)
skipped() {
    grep '"type":"metrics"' "$1/events.jsonl" | grep "\"step\":$2," | tail -1 | sed -n 's/.*"skipped_steps":\([0-9]*\).*/\1/p'
}
# ---- every strategy resumes exactly on 2 ranks (a rank killed at step 13). 16-mixed from a scale of
# 2^30, still coming down (skipping steps) at the step-10 checkpoint: a scaler that resumed fresh
# would skip otherwise (zero2's run at the default 2^16 skips none, so it cannot tell)
cases=("ddp 32-true" "zero3 bf16-true" "ddp 16-mixed compute.loss_scaler.initial_scale_power=30")
[ $full = 1 ] && cases+=("zero1 bf16-mixed" "zero2 16-mixed" "fsdp:SHARD_GRAD_OP 32-true")
for c in "${cases[@]}"; do
    set -- $c
    s=$1 p=$2 dir=r-${1%%:*}-$2${3:+-scaled}
    args=(compute.strategy=$s compute.precision=$p ${3:-})
    case $s in fsdp:*) args=(compute.strategy=fsdp compute.strategy_config.sharding_strategy=${s#fsdp:} compute.precision=$p) ;; esac
    two=(timeout 300 "$DTRUN" -n 2 run "${tiny[@]}" "${args[@]}" data.micro_batch_size=2 run.max_duration=20ba
        checkpoint.interval=5ba)
    run "$s $p: uninterrupted" 0 "${two[@]}" run.dir=$dir-u
    DTRUN_FAULT=kill@13:1 run "$s $p: rank 1 killed at step 13" 137 "${two[@]}" run.dir=$dir
    run "$s $p: the same command" 0 "${two[@]}" run.dir=$dir
    same "$s $p: each rank's file" "$(ls $dir/ckpt/step-00000020 | tr '\n' ' ')" \
        "manifest.json rank-00000-of-00002.bin rank-00001-of-00002.bin "
    same "$s $p: the losses after the resume are bitwise the uninterrupted run's" "$(compare $dir $dir-u 11 20)" bitwise
    if [ -n "${3:-}" ]; then
        k10=$(skipped $dir-u 10) k20=$(skipped $dir-u 20)
        [ "$k20" -gt "$k10" ] && ok "$s $p: the scale still came down after step 10 ($k10 -> $k20 skipped)" ||
            not_ok "$s $p: skipped $k10 steps by step 10 and $k20 by 20: the case no longer tests the scaler's state"
        same "$s $p: ... and the resumed run skipped the same steps" "$(skipped $dir 20)" "$k20"
    fi
done

# ---- (c) resharding: zero3 on 4 ranks -> ddp on 2 -> single -> zero1 on 4, one global batch of 8
rs=("${tiny[@]}" checkpoint.interval=10ba checkpoint.keep=0 data.micro_batch_size=2)
# the uninterrupted run, which the four legs must trace (under the sanitizers, the legs alone: the code
# that reads another world's checkpoint, whose arithmetic the optimized build checks)
u=rs-u
if [ $full = 1 ]; then
    run "zero3 on 4 ranks, 40 steps" 0 timeout 300 "$DTRUN" -n 4 run "${rs[@]}" compute.strategy=zero3 \
        run.max_duration=40ba run.dir=rs-u
else
    u=rs
fi
run "zero3 on 4 ranks to step 10" 0 timeout 300 "$DTRUN" -n 4 run "${rs[@]}" compute.strategy=zero3 \
    run.max_duration=10ba run.dir=rs
run "... then ddp on 2 ranks (accumulation 2) to step 20" 0 timeout 300 "$DTRUN" -n 2 run "${rs[@]}" \
    compute.strategy=ddp compute.gradient_accumulation_steps=2 run.max_duration=20ba run.dir=rs
has "... which resumed from zero3's 4 files" "$err" "resuming from rs/ckpt/step-00000010: step 10, 80 samples, written by zero3 on 4 ranks"
run "... then one rank (accumulation 4) to step 30" 0 "$DTRUN" run "${rs[@]}" compute.gradient_accumulation_steps=4 \
    run.max_duration=30ba run.dir=rs
has "... from ddp's" "$err" "resuming from rs/ckpt/step-00000020: step 20, 160 samples, written by ddp on 2 ranks"
run "... and back to zero1 on 4 ranks to step 40" 0 timeout 300 "$DTRUN" -n 4 run "${rs[@]}" compute.strategy=zero1 \
    run.max_duration=40ba run.dir=rs
if [ $full = 1 ]; then
    d=$(compare rs rs-u 11 40)
    within "$d" 1e-6 && ok "the four-leg run traces the uninterrupted one within fp32 tolerance ($d)" ||
        not_ok "resharded losses differ by $d"
fi
run "consolidate zero3's 4 files into one" 0 "$DTRUN" ckpt consolidate $u/ckpt/step-00000010 one
has "... says what it wrote" "$out" "one/step-00000010: step 10, "
has "... from where" "$out" "from $u/ckpt/step-00000010 (zero3 on 4 ranks)"
run "... resumed by one rank" 0 "$DTRUN" run "${rs[@]}" compute.gradient_accumulation_steps=4 run.max_duration=20ba \
    checkpoint.resume=one/step-00000010 run.dir=c1
run "... and the 4 files resumed by one rank" 0 "$DTRUN" run "${rs[@]}" compute.gradient_accumulation_steps=4 \
    run.max_duration=20ba checkpoint.resume=$u/ckpt/step-00000010 run.dir=c2
same "... give the same losses, bitwise" "$(compare c1 c2 11 20)" bitwise

finish
