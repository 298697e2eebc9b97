#!/usr/bin/env bash
# Events through a real HTTP receiver (tests/receiver.py on 127.0.0.1):
# (a) 500 steps at interval 1 deliver every event exactly once by id, in order;
# (b) a receiver down for the first half gets everything; (c) a receiver that
#     stalls every request 10 minutes does not hold a run of seconds past its
#     flush_timeout, and `dtrun events flush` sends what was spooled; (d) a
#     signed body verifies with the receiver's HMAC check and fails after one
#     byte is changed, and no secret reaches logs, events or `dtrun check`;
#     (e) every event type validates against src/events/events.schema.json.
# Also: 429 with Retry-After, 500, a closed connection, a 4xx that is not retried.
. "$(dirname "$0")/tap.sh"
. "$(dirname "$0")/receiver.sh"
cd "$TMP" || exit 1
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$TMP"' EXIT
tiny=(checkpoint.dir=null model.n_layer=1 model.n_embd=32 model.n_head=2 model.seq_len=16 data.micro_batch_size=4 run.eval_interval=0ba
    events.interval=1ba)

# ---- (a) every event once, in order, over one reused connection
receiver ok --out a.jsonl
run "(a) 500 steps, interval 1, to the receiver" 0 "$DTRUN" run "${tiny[@]}" run.max_duration=500ba run.dir=a \
    events.webhook.url="http://127.0.0.1:$port/hook"
same "(a) 502 events written: run_started, 500 metrics, run_finished" "$(wc -l <a/events.jsonl)" 502
same "(a) every one delivered exactly once by id, in order" "$(delivered a.jsonl a/events.jsonl)" \
    "502 events, 0 missing, 0 unexpected, order ok"
same "(a) one connection, reused (plus this stats query)" "$(stat_of connections)" 2
[ ! -e a/events.spool ] && ok "(a) nothing left in a spool" || not_ok "(a) a/events.spool was left"
stop_receiver

# ---- (b) down for the first half, up for the second: everything arrives, and the outage is said once.
# (What the webhook costs a step is a speed, which the machine's load decides: bench/webhook.sh
# measures it against the same run without webhook.)
b=(run.max_duration=600ba events.interval=5ba) # 122 events
rm -f b.jsonl
bport=$(free_port)
"$DTRUN" run "${tiny[@]}" "${b[@]}" run.dir=b events.webhook.url="http://127.0.0.1:$bport/" >b.out 2>b.err &
job=$!
for _ in $(seq 1200); do [ "$(wc -l 2>/dev/null <b/events.jsonl || echo 0)" -ge 61 ] && break; sleep 0.05; done
$PY "$RECEIVER" --port "$bport" --out b.jsonl &
rpid=$!
wait "$job"
same "(b) the run ends well" "$?" 0
same "(b) all events arrive" "$(delivered b.jsonl b/events.jsonl)" "122 events, 0 missing, 0 unexpected, order ok"
has "(b) the outage is said once" "$(grep -c "Couldn't connect to server" b.err)" 1
has "(b) ... and the recovery" "$(cat b.err)" "dtrun: warning: webhook http://127.0.0.1:"
stop_receiver

# ---- (c) a receiver that holds every request 10 minutes: training never waits on it, and the exit
# waits flush_timeout (2 s) at most. A sender that blocked training would hold this run 10 minutes
# a request; it ends in seconds (3-10 s, the sanitizer build included), and 120 s is allowed, a
# bound no load on this machine reaches and no waiting on the receiver stays under.
receiver stall:600 --out c.jsonl
c=(run.max_duration=300ba events.interval=5ba events.webhook.timeout=600s events.webhook.flush_timeout=2s)
run "(c) a run whose receiver stalls 600 s per request" 0 timeout 600 "$DTRUN" run "${tiny[@]}" "${c[@]}" run.dir=c \
    events.webhook.url="http://127.0.0.1:$port/"
within "$ms" 120000 && ok "(c) ... ends in $ms ms, not after 600 s" || not_ok "(c) the run took $ms ms"
has "(c) what is left is said" "$err" "events not delivered within 2s stay in c/events.spool"
mode ok
left=$(wc -l <c/events.spool)
# the run's 2 s is for its end, with the receiver stalled; the flush must deliver, on a loaded machine
run "(c) dtrun events flush c ($left events spooled)" 0 "$DTRUN" events flush c events.webhook.flush_timeout=60s
same "(c) flush says what it sent" "$out" "dtrun: events flush: c/events.spool: $left delivered, 0 left"
[ ! -e c/events.spool ] && ok "(c) the spool is gone" || not_ok "(c) c/events.spool is still there"
same "(c) then everything has arrived" "$(delivered c.jsonl c/events.jsonl)" "62 events, 0 missing, 0 unexpected, order ok"
run "(c) flush again: nothing to do" 0 "$DTRUN" events flush c
same "(c) ... it says so" "$out" "dtrun: events flush: nothing spooled in c"
stop_receiver

# ---- (d) signatures, and secrets kept out of sight
export DT_TEST_SECRET="s3cr3t-$RANDOM-value" DT_TEST_TOKEN="tok-$RANDOM-en"
mkdir raw
receiver ok --secret-env DT_TEST_SECRET --raw raw --out d.jsonl
if dtrun_has '^events: webhook, HMAC-SHA256'; then
    DTRUN_DEBUG=DEBUG run "(d) signed posts" 0 "$DTRUN" run "${tiny[@]}" run.max_duration=20ba run.dir=d \
        events.webhook.url="http://127.0.0.1:$port/" events.webhook.secret_env=DT_TEST_SECRET \
        events.webhook.headers='"Authorization: Bearer ${DT_TEST_TOKEN}"'
    same "(d) every event verified and delivered" "$(delivered d.jsonl d/events.jsonl) $(stat_of rejected) rejected" \
        "22 events, 0 missing, 0 unexpected, order ok 0 rejected"
    same "(d) the bearer token travelled" "$(grep Authorization raw/1.headers)" "Authorization: Bearer $DT_TEST_TOKEN"
    ts=$(sed -n 's/^X-Dtrun-Timestamp: //p' raw/1.headers)
    sig=$(sed -n 's/^X-Dtrun-Signature: //p' raw/1.headers)
    mac=$({ printf '%s.' "$ts"; cat raw/1.body; } | openssl dgst -sha256 -hmac "$DT_TEST_SECRET" | sed 's/.*= //')
    same "(d) the signature is HMAC-SHA256(secret, timestamp.body) (checked with openssl)" "$sig" "sha256=$mac"
    post() { curl -s -o /dev/null -w '%{http_code}' -H "X-Dtrun-Timestamp: $ts" -H "X-Dtrun-Signature: $sig" \
        -H 'Content-Type: application/json' --data-binary @"$1" "http://127.0.0.1:$port/"; }
    same "(d) the signed body, sent again, verifies" "$(post raw/1.body)" 200
    cp raw/1.body bad.body
    printf 'X' | dd of=bad.body bs=1 seek=30 conv=notrunc status=none
    same "(d) one byte changed: refused" "$(post bad.body)" 401
    has "(d) ... for its signature" "$(tail -1 d.jsonl)" '{"rejected":"bad signature"}'
    for f in d/events.jsonl d/config.yaml; do
        grep -q -e "$DT_TEST_SECRET" -e "$DT_TEST_TOKEN" "$f" && not_ok "(d) a secret is in $f" || ok "(d) no secret in $f"
    done
    grep -q -e "$DT_TEST_SECRET" -e "$DT_TEST_TOKEN" <<<"$err" && not_ok "(d) a secret is in the log" "$err" ||
        ok "(d) no secret in the (DEBUG) log"
else
    run "(d) signing without libcrypto" 2 "$DTRUN" run "${tiny[@]}" run.max_duration=2ba run.dir=d \
        events.webhook.url="http://127.0.0.1:$port/" events.webhook.secret_env=DT_TEST_SECRET
    has "(d) ... is refused at start, with the way out" "$err" "this build has no libcrypto to sign with"
fi
run "(d) dtrun check with credentials in the URL" 0 "$DTRUN" check \
    events.webhook.url="https://alice:pw-$RANDOM@hooks.example.com/x" events.webhook.secret_env=DT_TEST_SECRET
has "(d) check masks them" "$out" 'url: "https://***@hooks.example.com/x"'
grep -q -e "pw-" -e "$DT_TEST_SECRET" <<<"$out" && not_ok "(d) check shows a secret" || ok "(d) check shows no secret"
stop_receiver
dport=$(free_port)
run "(d) a down endpoint with credentials in its URL" 0 "$DTRUN" run "${tiny[@]}" run.max_duration=3ba run.dir=dd \
    events.webhook.url="http://alice:pw-x1@127.0.0.1:$dport/p?token=q-x2" events.webhook.flush_timeout=0
has "(d) the log names scheme, host and port only" "$err" "dtrun: warning: webhook http://127.0.0.1:$dport: Couldn't connect"
grep -q -e "pw-x1" -e "q-x2" <<<"$err" dd/events.jsonl && not_ok "(d) the URL's secrets leaked" ||
    ok "(d) neither the URL's password nor its query in the log or the events"
grep -q "pw-x1" dd/config.yaml && not_ok "(d) the password is in config.yaml" || ok "(d) config.yaml masks the password"
run "(d) flush refuses a masked URL" 2 "$DTRUN" events flush dd
has "(d) ... and says how to give it" "$err" "the webhook URL's credentials were masked when the run saved it"
unset DT_TEST_TOKEN
run "(d) a header's variable unset" 2 "$DTRUN" run "${tiny[@]}" run.max_duration=3ba run.dir=h \
    events.webhook.url="http://127.0.0.1:$dport/" events.webhook.headers='"Authorization: Bearer ${DT_TEST_TOKEN}"'
same "(d) ... says which" "$err" "events.webhook.headers: error: the environment variable DT_TEST_TOKEN is not set
  hint: export DT_TEST_TOKEN in the job's environment (sbatch passes it on)"
run "(d) secret_env names an unset variable" 2 "$DTRUN" run "${tiny[@]}" run.max_duration=3ba run.dir=h \
    events.webhook.url="http://127.0.0.1:$dport/" events.webhook.secret_env=DT_TEST_NOPE
has "(d) ... says which" "$err" "events.webhook.secret_env: error: it names DT_TEST_NOPE, which is not set in this process"
# HTTPS: a self-signed certificate is refused (the events wait in the spool) unless insecure: true
openssl req -x509 -newkey rsa:2048 -nodes -keyout key.pem -out cert.pem -days 1 -subj /CN=127.0.0.1 2>/dev/null
receiver ok --tls cert.pem key.pem --out tls.jsonl
# a handshake takes milliseconds, a second or more under ASan on a loaded machine: the first one gets 20 s
# to fail verification (the exit waits that long, retrying, before the events stay spooled)
run "(d) https to a self-signed certificate" 0 "$DTRUN" run "${tiny[@]}" run.max_duration=2ba run.dir=tls \
    events.webhook.url="https://127.0.0.1:$port/" events.webhook.connect_timeout=20s events.webhook.timeout=20s \
    events.webhook.flush_timeout=20s
has "(d) ... is not trusted" "$err" "dtrun: warning: webhook https://127.0.0.1:$port: SSL peer certificate or SSH remote key was not OK"
same "(d) ... nothing was sent, all is spooled" "$(cat tls.jsonl 2>/dev/null | wc -l) $(wc -l <tls/events.spool)" "0 4"
run "(d) the next run in that run.dir, with insecure: true" 0 "$DTRUN" run "${tiny[@]}" run.max_duration=2ba \
    run.dir=tls events.webhook.url="https://127.0.0.1:$port/" events.webhook.insecure=true
has "(d) ... is warned about" "$err" "dtrun: warning: events.webhook.insecure is true: the webhook's TLS certificate is not verified"
has "(d) ... sends the earlier run's spool first" "$err" "4 events spooled in tls/events.spool by an earlier run go out first"
same "(d) ... then its own, in order" "$(delivered tls.jsonl tls/events.jsonl)" "8 events, 0 missing, 0 unexpected, order ok"
same "(d) ... the earlier run's first" "$(sed -n 's/.*"run_id":"\([0-9a-f]*\)".*/\1/p' tls.jsonl | uniq | wc -l)" 2
stop_receiver

# ---- failures the sender retries, and one it does not
receiver status:429:1 --out r.jsonl
"$DTRUN" run "${tiny[@]}" run.max_duration=300ba run.dir=r events.webhook.url="http://127.0.0.1:$port/" \
    events.webhook.batch=8 events.webhook.max_backoff=1s events.webhook.flush_timeout=60s >r.out 2>r.err &
job=$!
sleep 1.5
mode status:500
sleep 1
mode close
# the receiver recovers once training is over, so that everything waits in the spool
for _ in $(seq 1200); do grep -q '"type":"run_finished"' r/events.jsonl 2>/dev/null && break; sleep 0.05; done
sleep 1
failing=$(stat_of requests) # how many the failures took depends on how long training took
mode ok
wait "$job"
same "(retry) the run ends well" "$?" 0
has "(retry) 429 is retried after its Retry-After" "$(cat r.err)" "HTTP 429: receiver told to fail; events go to r/events.spool"
same "(retry) every event arrives after 429, 500 and closed connections" "$(delivered r.jsonl r/events.jsonl)" \
    "302 events, 0 missing, 0 unexpected, order ok"
reqs=$(($(stat_of requests) - failing))
[ "$reqs" -lt 60 ] && ok "(retry) the backlog went 8 to a POST ($reqs requests once the receiver answered)" ||
    not_ok "(retry) $reqs requests for 302 events in batches of 8"
mode status:404
run "(4xx) a 404 is not retried" 0 "$DTRUN" run "${tiny[@]}" run.max_duration=40ba run.dir=x \
    events.webhook.url="http://127.0.0.1:$port/" events.webhook.batch=1
same "(4xx) said once" "$(grep -c 'not retried' <<<"$err")" 1
same "(4xx) the events are kept" "$(wc -l <x/events.spool.rejected)" 42
mode ok
run "(4xx) flush sends them once the receiver is fixed" 0 "$DTRUN" events flush x
same "(4xx) ... all of them" "$(delivered r.jsonl x/events.jsonl | sed 's/order .*//')" "344 events, 0 missing, 302 unexpected, "
stop_receiver

# ---- what the records carry: the step time broken down, and a DDP world's records from rank 0
run "breakdown" 0 "$DTRUN" run "${tiny[@]}" run.max_duration=20ba events.wall_clock_breakdown=true run.dir=w
last=$(grep '"type":"metrics"' w/events.jsonl | tail -1)
parts=$(sed 's/.*"step_ms":\([0-9.e+-]*\),"step_ms_breakdown":{"forward":\([0-9.e+-]*\),"backward":\([0-9.e+-]*\),"comm":\([0-9.e+-]*\),"optimizer":\([0-9.e+-]*\)}.*/\1 \2 \3 \4 \5/' <<<"$last")
awk -v p="$parts" 'BEGIN { split(p, a, " "); s = a[2] + a[3] + a[4] + a[5]; exit !(s <= a[1] * 1.001 && s >= 0.6 * a[1]) }' &&
    ok "forward + backward + comm + optimizer make up the step ($parts)" || not_ok "breakdown: $parts" "$last"
# op by op (kernels/profile.h): every op's ms inside the step's, the matmuls and the optimizer among them
ops=$($PY -c '
import json, sys
m = json.loads(sys.argv[1])
o = m["op_ms"]
print(len(o), sum(o.values()) <= m["step_ms"] * 1.001, all(o[k] > 0 for k in ("matmul_forward", "matmul_backward", "adamw_slices", "layernorm_forward", "attention_backward", "sumsq_parts")))' "$last")
nops=$(sed -n '/^static const char \*const op_names\[OP_N\] = {/,/^};/p' "$DT_SRCDIR/kernels/profile.c" | grep -c '^    "')
same "op_ms: every op of kernels/profile.c ($nops), inside the step, the ones a GPT step runs measured" "$ops" "$nops True True"
table=$(sed -n '/wall clock per step by op/,/(outside the ops)/p' <<<"$err")
has "the run ends with the table" "$table" "dtrun: wall clock per step by op (events.wall_clock_breakdown; each op timed from when the device has run the ops before it, so a GPU's are device times), over 19 steps of "
[ "$(grep -cE '^  [a-z_]+ +[0-9.]+ ms +[0-9.]+%  +[0-9.]+ calls$' <<<"$table")" -ge 10 ] && has "... slowest first, outside the ops last" "$table" "(outside the ops)" ||
    not_ok "the table has fewer than 10 op lines" "$table"
# validation and saving are not steps: their ops are not in the table, and the steps' ops all are, so
# that their sum stays inside the step (#38: validating between two metrics records dropped the
# interval's ops and part of its time, and "(outside the ops)" went negative). The same run validating
# every 5 steps and saving every step, a record every 10, calls each op as often per step, in
# bf16-mixed where saving converts too.
calls() { sed -n '/wall clock per step by op/,/(outside the ops)/p' <<<"$1" | awk '$NF == "calls" { print $1, $(NF - 1) }' | sort; }
run "breakdown, bf16-mixed, a record every 10 steps" 0 "$DTRUN" run "${tiny[@]}" run.max_duration=20ba \
    events.wall_clock_breakdown=true compute.precision=bf16-mixed events.interval=10ba run.dir=w16
plain=$err
run "... validating every 5 steps, saving every step" 0 "$DTRUN" run "${tiny[@]}" run.max_duration=20ba \
    events.wall_clock_breakdown=true compute.precision=bf16-mixed run.eval_interval=5ba checkpoint.dir=ckpt \
    checkpoint.interval=1ba checkpoint.keep=1 events.interval=10ba run.dir=w16s
[ "$(calls "$plain" | grep -c ' [0-9.]*$')" -ge 10 ] && same "... the same calls per step of every op" "$(calls "$err")" \
    "$(calls "$plain")" || not_ok "fewer than 10 ops in the table" "$plain"
# nor is the setup (the parameters' fill, their conversion to bf16): every op's calls per step are whole
same "... no op called a fraction of a time per step" "$(calls "$plain" | awk '$2 !~ /\.0$/')" ""
if dtrun_has '^comm: mpi'; then
    receiver ok --out ddp.jsonl
    run "dtrun -n 2 with the webhook" 0 timeout 300 "$DTRUN" -n 2 "${tiny[@]}" run.max_duration=30ba run.dir=ddp \
        events.webhook.url="http://127.0.0.1:$port/"
    same "every record arrives, from rank 0" "$(delivered ddp.jsonl ddp/events.jsonl) $(sed 's/.*"rank":\([0-9]*\).*/\1/' ddp.jsonl | sort -u)" \
        "32 events, 0 missing, 0 unexpected, order ok 0"
    has "run_started names the world" "$(head -1 ddp/events.jsonl)" '"world":{"size":2,"nodes":1,"ranks_per_node":2,'
    [ -z "$(ls ddp | grep spool)" ] && ok "no rank left a spool" || not_ok "spools left: $(ls ddp)"
    stop_receiver
    DTRUN_FAULT=grad_inf@3:1 run "rank 1 fails (fp16 overflow at the minimum scale)" 1 timeout 300 "$DTRUN" -n 2 \
        "${tiny[@]}" run.max_duration=20ba compute.precision=16-mixed compute.loss_scaler.initial_scale_power=0 \
        compute.loss_scaler.hysteresis=1 run.dir=ddpf
    same "run_failed from every rank that saw it, in the file from rank 0" "$(grep -c '"type":"run_failed"' ddpf/events.jsonl)" 1
else
    ok "# SKIP no MPI in this build: DDP records"
fi

# ---- (e) every event type against the JSON Schema, with a real validator
DTRUN_FAULT=grad_inf@3:0 run "(e) a failing run (fp16 overflow at the minimum scale)" 1 "$DTRUN" run "${tiny[@]}" \
    run.max_duration=20ba compute.precision=16-mixed compute.loss_scaler.initial_scale_power=0 \
    compute.loss_scaler.hysteresis=1 run.dir=f
has "(e) ... reports run_failed, with the step and the error" "$(tail -1 f/events.jsonl)" \
    '"type":"run_failed","time"'
has "(e) ... the step and the error" "$(tail -1 f/events.jsonl)" \
    '"step":3,"error":"dtrun: error: step 3: the gradients overflow fp16 at the minimum loss scale 1 (1 steps skipped so far)\n  hint:'
"$DTRUN" events example >example.jsonl
same "(e) dtrun events example: one of each type" "$(sed 's/.*"type":"\([a-z_]*\)".*/\1/' example.jsonl | sort | tr '\n' ' ')" \
    "checkpoint_failed checkpoint_saved eval metrics preempted run_failed run_finished run_started sample "
schema=$DT_SRCDIR/src/events/events.schema.json
run "(e) validate written and received events" 0 $PY "$DT_SRCDIR/tests/validate_events.py" "$schema" example.jsonl \
    a/events.jsonl a.jsonl f/events.jsonl
same "(e) every type valid" "$(sed 's/ (.*//' <<<"$out" | tr '\n' ' ')" \
    "checkpoint_failed ok checkpoint_saved ok eval ok metrics ok preempted ok run_failed ok run_finished ok run_started ok sample ok "
sed -n 2p example.jsonl | sed 's/"loss":[0-9.]*,//' >broken.jsonl
run "(e) the validator catches a record without its loss" 1 $PY "$DT_SRCDIR/tests/validate_events.py" "$schema" \
    broken.jsonl
finish
