#!/usr/bin/env bash
# The dtrun SPANK plugin and `dtrun submit` on a Slurm cluster of this test's own (scripts/testbed
# in $TMP, so its plugstack.conf can change between cases without touching other tests): options
# in srun/sbatch/salloc, a bad --dt-config refused before anything is allocated, the admin's
# arguments (an unknown one refused, the webhook allow-list, NCCL settings), DTRUN_* in every task
# equal to Slurm's and cross-checked by dtrun, one GPU per task, the precedence of config layers,
# task_failed from slurmstepd when a rank is killed, `dtrun submit` to the end, and the plugin as
# `make install DESTDIR=...` puts it.
. "$(dirname "$0")/tap.sh"
. "$DT_SRCDIR/tests/cli/receiver.sh"
cd "$TMP" || exit 1
build=$(dirname "$(dirname "$DTRUN")")
plugin=$build/spank/.libs/spank_dtrun.so
if [ ! -f "$plugin" ]; then
    echo "1..0 # SKIP this build has no SPANK plugin (configure found no slurm/spank.h)"
    exit 0
fi
if [ "$(id -u)" != 0 ] || ! command -v slurmctld >/dev/null; then
    echo "1..0 # SKIP a Slurm testbed needs root and slurm-wlm"
    exit 0
fi
tb=$TMP/tb
trap 'kill $(jobs -p) 2>/dev/null; "$DT_SRCDIR/scripts/testbed" stop "$tb" >/dev/null 2>&1; rm -rf "$TMP"' EXIT
# KillWait 60 s: a rank that outlives its killed peer must end by itself (in 1-3 s), well before
# Slurm's SIGKILL
DT_TESTBED_KILLWAIT=60 "$DT_SRCDIR/scripts/testbed" start "$tb" >/dev/null || {
    echo "not ok 1 - the test's own Slurm testbed did not start"
    echo "1..1"
    exit 0
}
export SLURM_CONF=$tb/slurm.conf OMPI_MCA_btl=self,tcp OMP_NUM_THREADS=1
unset DTRUN_RUN_NAME DTRUN_WEBHOOK_URL DTRUN_CONFIG DTRUN_WEBHOOK_ALLOW DTRUN_SITE_WEBHOOK_URL DTRUN_JOB_WEBHOOK
stack() { echo "required $plugin dtrun=$DTRUN $*" >"$tb/plugstack.conf"; }
tiny=(model.n_layer=1 model.n_embd=32 model.n_head=2 model.seq_len=16 data.micro_batch_size=2 run.eval_interval=0ba
    events.interval=1ba)
jobid() { sbatch --parsable -o /dev/null --wrap true; }
stack webhook_allow=127.0.0.1,localhost

# ---- the plugin is its own small library
syms=$(nm -D --defined-only "$plugin" | awk '{print $3}' | sort | tr '\n' ' ')
same "it exports the SPANK hooks alone" "$syms" "plugin_name plugin_type plugin_version slurm_spank_init slurm_spank_init_post_opt slurm_spank_task_exit slurm_spank_task_init "
same "none of the training core is in it" "$(nm "$plugin" | grep -c -e ' dt_config_' -e ' dt_train' -e ' dt_model' -e ' dt_comm')" 0
for c in srun sbatch salloc; do
    has "$c --help lists --dt-config" "$($c --help 2>&1)" "--dt-config=FILE"
done
has "... and --dt-gpu-bind" "$(srun --help 2>&1)" "--dt-gpu-bind=auto|none"

# ---- a bad config is refused in the submitting process: dtrun's own message, no job
printf 'model:\n  n_layer: 2\n  n_heads: 4\n' >bad.yaml
before=$(jobid)
run "srun --dt-config=bad.yaml" 1 srun --dt-config=bad.yaml true
has "... with dtrun's file:line:col message" "$err" "srun: error: $TMP/bad.yaml:3:3: error: unknown key 'n_heads' in model (dtrun config)"
has "... saying nothing was submitted" "$err" "srun: error: dtrun spank: --dt-config=bad.yaml is refused; nothing was submitted:"
run "sbatch --dt-config=bad.yaml" 1 sbatch --dt-config=bad.yaml --wrap true
has "... the same message" "$err" "sbatch: error: $TMP/bad.yaml:3:3: error: unknown key 'n_heads' in model (dtrun config)"
same "... and no job id" "$out" ""
run "salloc --dt-config=missing.yaml" 1 salloc --dt-config=missing.yaml true
has "... names the missing file" "$err" "missing.yaml"
same "no job was created by any of them" "$(jobid)" $((before + 1))

# ---- the admin's allow-list: at submission, for an option and for a config's URL
run "srun --dt-webhook to a host outside webhook_allow" 255 srun --dt-webhook=http://evil.example/h true
has "... is refused, naming the host and the list" "$err" "dtrun spank: --dt-webhook: the host evil.example is not in this cluster's webhook allow-list (127.0.0.1,localhost)"
printf 'events:\n  webhook:\n    url: https://evil.example/h\n' >evil.yaml
run "sbatch --dt-config naming such a webhook" 1 sbatch --dt-config=evil.yaml --wrap true
has "... is refused where the config says it" "$err" "sbatch: error: $TMP/evil.yaml:3:10: error: events.webhook.url: the host evil.example is not in this cluster's webhook allow-list (127.0.0.1,localhost)"
run "srun dtrun with such a config (no --dt-config)" 2 srun "$DTRUN" check evil.yaml
has "... is refused in the task" "$err" "evil.yaml:3:10: error: events.webhook.url: the host evil.example is not in this cluster's webhook allow-list"

# ---- an unknown admin argument: a clear error in srun and sbatch, never a drained node
stack webhook_allow=localhost colour=blue
run "srun with a bad plugstack.conf line" 1 srun true
has "... names the argument" "$err" "dtrun spank: plugstack.conf: unknown argument 'colour' (accepted: dtrun=PATH, webhook=URL"
run "sbatch too" 1 sbatch --wrap true
has "... the same" "$err" "dtrun spank: plugstack.conf: unknown argument 'colour'"
same "no node drained" "$(sinfo -h -o %t | grep -c drain)" 0
stack webhook_allow=127.0.0.1,localhost

# ---- in the task: DTRUN_* from Slurm's items, and dtrun checks them
run "srun -N2 -n4: DTRUN_* in every task" 0 srun -N2 -n4 --ntasks-per-node=2 bash -c \
    'echo $SLURM_PROCID/$DTRUN_RANK $SLURM_NTASKS/$DTRUN_WORLD_SIZE $SLURM_LOCALID/$DTRUN_LOCAL_RANK 2/$DTRUN_LOCAL_WORLD_SIZE $SLURM_NODEID/$DTRUN_NODE_RANK $SLURM_NNODES/$DTRUN_NUM_NODES'
same "... equal to Slurm's" "$(sort <<<"$out" | tr '\n' ' ')" "0/0 4/4 0/0 2/2 0/0 2/2 1/1 4/4 1/1 2/2 0/0 2/2 2/2 4/4 0/0 2/2 1/1 2/2 3/3 4/4 1/1 2/2 1/1 2/2 "
run "srun -N2 -n4 --mpi=pmix --dt-config=gpt-tiny.yaml dtrun" 0 timeout 300 srun -N2 -n4 --ntasks-per-node=2 --mpi=pmix \
    --dt-config="$DT_SRCDIR/templates/gpt-tiny.yaml" --dt-run-name=spanky "$DTRUN" "${tiny[@]}" run.max_duration=3ba run.dir=t4
has "... trains on 4 ranks" "$err" "; 4 ranks (ddp)"
has "... the run named by --dt-run-name" "$(head -1 t4/events.jsonl)" '"run_name":"spanky"'
run "a task whose DTRUN_RANK was changed" 4 timeout 120 srun -N1 -n2 --mpi=pmix bash -c \
    'DTRUN_RANK=$((1 - SLURM_PROCID)) exec "$0" info' "$DTRUN"
has "... is refused, both values named" "$err" "dtrun: error: the dtrun SPANK plugin says DTRUN_RANK=1 (from Slurm) but pmix says rank 0"

# ---- one GPU per task from the step's GPUs (fake ones: TESTBED.md)
run "srun -n2 --gres=gpu:2 dtrun info" 0 timeout 120 srun -N1 -n2 --mpi=pmix --gres=gpu:2 "$DTRUN" info
has "rank 0 drives GPU 0 alone" "$out" "rank 0/2 (local 0/2, node 0/1) from pmix; Slurm job"
has "... (CUDA_VISIBLE_DEVICES=0)" "$out" "device cuda:0 (GPU 0 of the node; CUDA_VISIBLE_DEVICES=0, SLURM_STEP_GPUS=0,1)"
has "rank 1 GPU 1" "$out" "device cuda:0 (GPU 1 of the node; CUDA_VISIBLE_DEVICES=1, SLURM_STEP_GPUS=0,1)"
run "--dt-gpu-bind=none" 0 srun -N1 -n2 --gres=gpu:2 --dt-gpu-bind=none bash -c 'echo $CUDA_VISIBLE_DEVICES'
same "... leaves Slurm's list" "$(tr '\n' ' ' <<<"$out")" "0,1 0,1 "
run "a program other than dtrun" 0 srun -N1 -n2 --gres=gpu:2 bash -c 'echo $CUDA_VISIBLE_DEVICES'
same "... keeps Slurm's list too" "$(tr '\n' ' ' <<<"$out")" "0,1 0,1 "
run "... unless it asks with --dt-gpu-bind=auto" 0 srun -N1 -n2 --gres=gpu:2 --dt-gpu-bind=auto bash -c \
    'echo $SLURM_LOCALID:$CUDA_VISIBLE_DEVICES'
same "... one each" "$(sort <<<"$out" | tr '\n' ' ')" "0:0 1:1 "
run "--dt-gpu-bind=some" 255 srun --dt-gpu-bind=some true
has "... is refused" "$err" "dtrun spank: --dt-gpu-bind=some: give auto (one GPU per task from the step's GPUs) or none"

# ---- the cluster's NCCL settings, and whether users may override them
stack NCCL_SOCKET_IFNAME=lo NCCL_IB_HCA=mlx5_0
run "NCCL defaults reach the task" 0 srun bash -c 'echo $NCCL_SOCKET_IFNAME $NCCL_IB_HCA'
same "... both" "$out" "lo mlx5_0"
run "... a user's own value wins (nccl_user_override=yes, the default)" 0 env NCCL_IB_HCA=mine srun bash -c 'echo $NCCL_IB_HCA'
same "... kept" "$out" "mine"
stack NCCL_IB_HCA=mlx5_0 nccl_user_override=no
run "with nccl_user_override=no" 0 env NCCL_IB_HCA=mine srun bash -c 'echo $NCCL_IB_HCA'
same "... the cluster's value" "$out" "mlx5_0"
has "... and the user is told" "$err" "dtrun spank: NCCL_IB_HCA=mine from your environment is replaced by this cluster's mlx5_0 (nccl_user_override=no in plugstack.conf)"

# ---- built-in < site file < user YAML < SPANK option < command-line override
receiver ok --out site.jsonl
stack "webhook=http://127.0.0.1:$port/site"
printf 'run:\n  name: from-site\n' >site.yaml
printf 'run:\n  name: from-yaml\n' >user.yaml
get() { srun "$@" 2>&1 | tr '\n' ' '; }
same "built-in" "$(get env DTRUN_SITE_CONFIG= "$DTRUN" check --get run.name)" "gpt-tiny "
same "site file over the built-in" "$(get env DTRUN_SITE_CONFIG=site.yaml "$DTRUN" check --get run.name)" "from-site "
same "user YAML over the site file" "$(get env DTRUN_SITE_CONFIG=site.yaml "$DTRUN" check user.yaml --get run.name)" "from-yaml "
same "--dt-run-name over the YAML" "$(get --dt-run-name=from-spank env DTRUN_SITE_CONFIG=site.yaml "$DTRUN" check user.yaml \
    --get run.name)" "from-spank "
same "a command-line override over --dt-run-name" "$(get --dt-run-name=from-spank env DTRUN_SITE_CONFIG=site.yaml "$DTRUN" \
    check user.yaml run.name=from-cli --get run.name)" "from-cli "
same "plugstack.conf webhook= is the site's default webhook" "$(get "$DTRUN" check --get events.webhook.url)" \
    "http://127.0.0.1:$port/site "
printf 'events:\n  webhook:\n    url: http://localhost:9/yaml\n' >hook.yaml
same "... a user's YAML overrides it" "$(get "$DTRUN" check hook.yaml --get events.webhook.url)" "http://localhost:9/yaml "
same "... and --dt-webhook the YAML" "$(get --dt-webhook=http://localhost:9/opt "$DTRUN" check hook.yaml \
    --get events.webhook.url)" "http://localhost:9/opt "
stop_receiver

# ---- a rank killed from outside: one task_failed from slurmstepd, the step ends at once
receiver ok --out got.jsonl
stack webhook_allow=127.0.0.1 task_failed_timeout=2
timeout 300 srun -N2 -n2 --mpi=pmix --kill-on-bad-exit=1 --dt-webhook="http://127.0.0.1:$port/h" --dt-run-name=victim \
    "$DTRUN" "${tiny[@]}" run.max_duration=1000000ba run.dir=k >k.out 2>k.err &
job=$!
for _ in $(seq 600); do grep -q '"type":"metrics"' k/events.jsonl 2>/dev/null && break; sleep 0.1; done
victim=
for p in $(pgrep -f "run.dir=k\$"); do
    [ "$(cat /proc/$p/comm 2>/dev/null)" = dtrun ] && tr '\0' '\n' </proc/$p/environ | grep -qx DTRUN_RANK=1 && victim=$p
done
[ -n "$victim" ] && ok "rank 1 found (pid $victim)" || not_ok "no rank 1 to kill"
kill -9 "$victim"
start=$SECONDS
wait $job
rc=$?
[ "$rc" != 0 ] && ok "the step fails (srun exit code $rc)" || not_ok "srun exit code 0 after a rank was killed"
# srun sends the other rank SIGTERM; it cannot reach a step boundary without its peer, says so and ends
# (rather than being killed at the end of KillWait, which would be a second task_failed)
[ $((SECONDS - start)) -lt 50 ] && ok "the step ended before Slurm's KillWait (60 s) ran out ($((SECONDS - start)) s)" ||
    not_ok "the step took $((SECONDS - start)) s to end after the kill"
same "... rank 0 was not killed" "$(grep -c 'task 0: Killed' k.err)" 0
has "... the other rank says why it stopped" "$(cat k.err)" "[rank 0] dtrun: rank 0: error: "
has "... naming the dead one" "$(cat k.err)" "could not finish after a stop signal at step "
for _ in $(seq 50); do grep -q task_failed got.jsonl 2>/dev/null && break; sleep 0.1; done
same "one task_failed arrived" "$(grep -c '"type":"task_failed"' got.jsonl)" 1
tf=$(grep '"type":"task_failed"' got.jsonl)
has "... for rank 1" "$tf" '"rank":1,"local_rank":0,'
has "... killed by SIGKILL" "$tf" '"signal":"SIGKILL","signal_number":9,"exit_status":null,"core_dumped":false'
has "... on node n2, of the named run" "$tf" '"run_name":"victim",'
has "... node" "$tf" '"node":"n2","node_rank":1,'
grep '"type":"task_failed"' got.jsonl >tf.jsonl
run "... valid against events.schema.json" 0 /usr/bin/python3 "$DT_SRCDIR/tests/validate_events.py" \
    "$DT_SRCDIR/src/events/events.schema.json" tf.jsonl
has "... (checked)" "$out" "task_failed ok (1)"
# a program other than dtrun: its non-zero exit is reported too (dtrun reports its own failures)
: >got.jsonl
run "a non-dtrun task that exits 3" 3 srun --dt-webhook="http://127.0.0.1:$port/h" bash -c 'exit 3'
for _ in $(seq 50); do grep -q task_failed got.jsonl 2>/dev/null && break; sleep 0.1; done
has "... task_failed with its status" "$(cat got.jsonl)" '"signal":null,"signal_number":null,"exit_status":3,'
# signed with the admin's secret, which the receiver checks (a wrong one would be answered 401)
stop_receiver
printf 'admin-secret\n' >secret
chmod 600 secret
TF_SECRET=admin-secret receiver ok --out signed.jsonl --secret-env TF_SECRET
stack webhook_allow=127.0.0.1 "webhook_secret_file=$TMP/secret"
run "task_failed with webhook_secret_file" 137 srun --dt-webhook="http://127.0.0.1:$port/h" bash -c 'kill -9 $$'
for _ in $(seq 50); do grep -q task_failed signed.jsonl 2>/dev/null && break; sleep 0.1; done
has "... arrives with a signature the receiver accepts" "$(cat signed.jsonl)" '"type":"task_failed"'
same "... none rejected" "$(stat_of rejected)" 0
stop_receiver
printf 'another\n' >secret
TF_SECRET=admin-secret receiver ok --out signed.jsonl --secret-env TF_SECRET
run "... with the wrong secret" 137 srun --dt-webhook="http://127.0.0.1:$port/h" bash -c 'kill -9 $$'
for _ in $(seq 50); do [ "$(stat_of rejected)" = 1 ] && break; sleep 0.1; done
same "... it is rejected (so the signature is real)" "$(stat_of rejected)" 1
stop_receiver
receiver ok --out got.jsonl
# a receiver that does not answer: the step still ends, the post given up after the timeout
mode stall:60
stack webhook_allow=127.0.0.1 task_failed_timeout=1
: >got.jsonl
start=$SECONDS
run "a killed task while the webhook stalls" 137 timeout 120 srun --dt-webhook="http://127.0.0.1:$port/h" bash -c 'kill -9 $$'
[ $((SECONDS - start)) -lt 30 ] && ok "... srun ends without waiting for the receiver ($((SECONDS - start)) s)" ||
    not_ok "srun waited $((SECONDS - start)) s for a stalled receiver"
stop_receiver

# ---- dtrun submit: the template filled in, submitted, run to the end, events at the receiver
receiver ok --out sub.jsonl
run "dtrun submit --dry-run" 0 "$DTRUN" submit "$DT_SRCDIR/templates/gpt-tiny.yaml" "${tiny[@]}" run.max_duration=4ba \
    compute.num_devices=2 run.dir=sub slurm.time=10 slurm.extra=--exclusive "events.webhook.url=http://127.0.0.1:$port/s" \
    --dry-run
has "... prints the script: geometry from the config" "$out" $'#SBATCH --nodes=1\n#SBATCH --ntasks-per-node=2\n#SBATCH --time=10\n#SBATCH --signal=USR1@120\n#SBATCH --requeue\n#SBATCH --open-mode=append\n'"#SBATCH --output=$TMP/sub/slurm-%j.out"$'\n#SBATCH --exclusive\n'
same "... the template's own directives replaced, not repeated" "$(grep -c '^#SBATCH --nodes' <<<"$out")" 1
has "... the dtrun, config and overrides it runs" "$out" "set -- $(realpath "$DT_SRCDIR")/templates/gpt-tiny.yaml model.n_layer=1"
has "... the webhook for task_failed" "$out" "export DTRUN_JOB_WEBHOOK=http://127.0.0.1:$port/s"
[ ! -e sub ] && ok "... and submits nothing" || not_ok "--dry-run created sub/"
run "dtrun submit" 0 "$DTRUN" submit "$DT_SRCDIR/templates/gpt-tiny.yaml" "${tiny[@]}" run.max_duration=4ba \
    compute.num_devices=2 run.dir=sub "events.webhook.url=http://127.0.0.1:$port/s"
id=$out
[[ "$id" =~ ^[0-9]+$ ]] && ok "... prints the job id ($id)" || not_ok "dtrun submit printed '$id'"
has "... and where its output goes" "$err" "dtrun: submitted batch job $id (1 node x 2 tasks); output in $TMP/sub/slurm-$id.out, script $TMP/sub/sbatch.sh"
# until Slurm says it ended (an empty answer from a loaded controller is not an end)
for _ in $(seq 1200); do
    case "$(scontrol show job -o "$id" 2>/dev/null | grep -o 'JobState=[A-Z_]*')" in
    *=COMPLETED | *=FAILED | *=CANCELLED | *=TIMEOUT | *=NODE_FAIL | *=OUT_OF_MEMORY | *=BOOT_FAIL) break ;;
    *) sleep 0.1 ;;
    esac
done
same "the job completed" "$(scontrol show job "$id" | grep -o 'JobState=[A-Z]*')" JobState=COMPLETED
has "... trained to the end on 2 ranks" "$(cat sub/slurm-$id.out)" "[rank 0] dtrun: done: 4 steps"
has "its events reached the receiver" "$(cat sub.jsonl)" '"type":"run_finished"'
same "the script is kept, 0600" "$(stat -c %a sub/sbatch.sh)" 600
printf 'slurm:\n  time: "4 hours"\n' >time.yaml
run "slurm.time that Slurm cannot read" 2 "$DTRUN" submit time.yaml --dry-run
has "... is named" "$err" "time.yaml:2:9: error: slurm.time: '4 hours' is not a Slurm time limit"
run "sbatch's own refusal" 6 "$DTRUN" submit "${tiny[@]}" run.dir=sub2 -- --partition=nosuch
has "... is passed on" "$err" "dtrun: error: sbatch refused the job (exit code 1; its message is above); the script is $TMP/sub2/sbatch.sh"
stop_receiver

# ---- the installed plugin is the one Slurm loads
run "make install DESTDIR=root" 0 make -C "$build" install DESTDIR="$TMP/root"
plugindir=$(sed -n 's/^slurmplugindir = //p' "$build/Makefile")
prefix=$(sed -n 's/^prefix = //p' "$build/Makefile")
sysconfdir=$(sed -n 's/^sysconfdir = //p' "$build/Makefile" | sed "s|\${prefix}|$prefix|")
for f in "$plugindir/spank_dtrun.so" "$prefix/bin/dtrun" "$prefix/share/dtrun/templates/sbatch/single-node.sh" \
    "$prefix/share/dtrun/templates/sbatch/multi-node.sh" "$sysconfdir/slurm/plugstack.conf.d/dtrun.conf" \
    "$sysconfdir/dtrun.yaml.example"; do
    [ -f "$TMP/root$f" ] && ok "installed: $f" || not_ok "missing after make install: $f"
done
has "the plugstack.conf.d line names the installed dtrun" "$(cat "$TMP/root$sysconfdir/slurm/plugstack.conf.d/dtrun.conf")" \
    "required spank_dtrun.so dtrun=$prefix/bin/dtrun"
echo "required $TMP/root$plugindir/spank_dtrun.so dtrun=$TMP/root$prefix/bin/dtrun" >"$tb/plugstack.conf"
run "srun --dt-config=bad.yaml with the installed plugin" 1 srun --dt-config=bad.yaml true
has "... refused by it, through the installed dtrun" "$err" "srun: error: $TMP/bad.yaml:3:3: error: unknown key 'n_heads' in model (dtrun config)"
run "a good config through it" 0 timeout 120 srun -n2 --mpi=pmix --dt-config="$DT_SRCDIR/templates/gpt-tiny.yaml" \
    "$TMP/root$prefix/bin/dtrun" "${tiny[@]}" run.max_duration=2ba run.dir=inst
has "... trains" "$err" "[rank 0] dtrun: done: 2 steps"
finish
