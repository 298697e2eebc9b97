#!/usr/bin/env bash
# events.prometheus (issue #31): the metrics file for node_exporter's textfile collector, written
# by real runs. (a) a short run's final file is well-formed (promtool check metrics where Debian's
# prometheus package put it, and always the strict reader below), has the step, tokens and loss of
# events.jsonl's last metrics record and says the run ended, with no temporary file left; (b) every
# copy taken while a run rewrites it every step is whole; (c) an absolute path outside run.dir, its
# directory made; (d) a name without .prom is refused, with the fix; (e) an unwritable directory
# is one warning, and the run goes on.
. "$(dirname "$0")/tap.sh"
cd "$TMP" || exit 1
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$TMP"' EXIT
PY=/usr/bin/python3
tiny=(model.n_layer=1 model.n_embd=32 model.n_head=2 model.seq_len=16 data.micro_batch_size=4)

# The text exposition format 0.0.4, strictly: lines `# HELP name text`, `# TYPE name
# counter|gauge|untyped`, or samples `name{label="value",...} value`, single spaces, nothing
# before or after; each family its HELP, TYPE and samples, once; no timestamps (the collector
# refuses them); UTF-8; a newline at the end. `check FILE...` prints each file's first fault;
# `show FILE` prints its samples as `name value` (labels dropped) for the comparisons below.
cat >prom.py <<'EOF'
import math, re, sys

NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
LABEL = r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\[\\"n])*)"'
FLOAT = r"(?P<value>-?[0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?|NaN|[+-]Inf)"
SAMPLE = re.compile(rf"({NAME})(\{{{LABEL}(?:,{LABEL})*\}})? {FLOAT}")
HELP = re.compile(rf"# HELP ({NAME}) ((?:[^\\]|\\[\\n])+)")
TYPE = re.compile(rf"# TYPE ({NAME}) (counter|gauge|untyped)")

def check(data):
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        return f"not UTF-8 at byte {e.start}"
    if not text.endswith("\n"):
        return "no newline at the end"
    families, series, family, kind, sampled = set(), set(), None, None, True
    for n, line in enumerate(text[:-1].split("\n"), 1):
        if m := HELP.fullmatch(line):
            if not sampled:
                return f"line {n}: {family} has no samples"
            if m[1] in families:
                return f"line {n}: {m[1]} given twice"
            families.add(m[1])
            family, kind, sampled = m[1], None, False
        elif m := TYPE.fullmatch(line):
            if m[1] != family or kind:
                return f"line {n}: a TYPE not right after its HELP"
            kind = m[2]
        elif m := SAMPLE.fullmatch(line):
            if m[1] != family or not kind:
                return f"line {n}: a sample outside its family (HELP, then TYPE, then samples)"
            names = re.findall(LABEL, m[2] or "")
            if len({k for k, _ in names}) != len(names) or any(k.startswith("__") for k, _ in names):
                return f"line {n}: a label given twice, or a reserved one"
            if (m[1], m[2]) in series:
                return f"line {n}: a series given twice"
            series.add((m[1], m[2]))
            if kind == "counter" and not 0 <= float(m["value"]) < math.inf:
                return f"line {n}: a counter below 0 or not finite"
            sampled = True
        else:
            return f"line {n}: malformed: {line!r}"
    return None if sampled else f"{family} has no samples"

if sys.argv[1] == "check":
    bad = [f"{p}: {why}" for p in sys.argv[2:] if (why := check(open(p, "rb").read()))]
    print("\n".join(bad) if bad else f"{len(sys.argv) - 2} well-formed")
else:
    for line in open(sys.argv[2]):
        if not line.startswith("#"):
            print(re.sub(r"\{.*\}", "", line), end="")
EOF

# the reader refuses what it should (promtool is not always there to catch what it misses)
printf '# HELP a A.\n# TYPE a gauge\na{x="1"} 1\n' >good.prom
printf '# HELP a A.\n# TYPE a gauge\na{x="1"} 1 1700000000000\n' >bad1.prom
printf '# HELP a A.\n# TYPE a gauge\na{x="\\t"} 1\n' >bad2.prom
printf '# HELP a A.\n# TYPE a counter\na -1\n' >bad3.prom
printf '# HELP a A.\n# TYPE a gauge\na 1' >bad4.prom
printf '# HELP a A.\n# TYPE a gauge\nb 1\n' >bad5.prom
printf '# HELP a A.\n# TYPE a gauge\na{x="\xff"} 1\n' >bad6.prom
same "the reader takes a good file" "$($PY prom.py check good.prom)" "1 well-formed"
same "... and refuses a timestamp, a bad escape, a negative counter, no last newline, another family, not UTF-8" \
    "$($PY prom.py check bad?.prom | cut -d: -f1,2 | tr '\n' ' ')" \
    "bad1.prom: line 3 bad2.prom: line 3 bad3.prom: line 3 bad4.prom: no newline at the end bad5.prom: line 3 bad6.prom: not UTF-8 at byte 32 "

# checked with promtool (when there) and the reader
well_formed() {
    local name=$1
    shift
    if command -v promtool >/dev/null; then
        local f why=""
        for f in "$@"; do why+=$(promtool check metrics <"$f" 2>&1) || why+=" ($f)"; done
        same "$name: promtool check metrics" "$why" ""
    fi
    same "$name: well-formed" "$($PY prom.py check "$@")" "$# well-formed"
}

# ---- (a) a short run: the final file, against events.jsonl
run "(a) 20 steps, metrics every 5, events.prometheus=metrics.prom" 0 "$DTRUN" run "${tiny[@]}" run.dir=a \
    run.max_duration=20ba events.interval=5ba run.eval_interval=10ba events.prometheus=metrics.prom
well_formed "(a) a/metrics.prom" a/metrics.prom
$PY prom.py show a/metrics.prom >a.values
value() { awk -v n="dtrun_$1" '$1 == n { print $2 }' "$2"; }
last=$(grep '"type":"metrics"' a/events.jsonl | tail -n 1)
field() { sed -n "s/.*\"$1\":\([^,}]*\).*/\1/p" <<<"$last"; }
same "(a) step is the last metrics record's" "$(value step a.values)" "$(field step)"
same "(a) tokens_total is its tokens" "$(value tokens_total a.values)" "$(field tokens)"
within "$($PY -c "import sys; a, b = map(float, sys.argv[1:]); print(abs(a - b) / abs(b))" \
    "$(value loss a.values)" "$(field loss)")" 1e-8 && ok "(a) loss is its loss" ||
    not_ok "(a) loss $(value loss a.values), the record's $(field loss)"
same "(a) the run ended: dtrun_running 0, dtrun_up 1" "$(value running a.values) $(value up a.values)" "0 1"
same "(a) the last checkpoint is the end's" "$(value last_checkpoint_step a.values)" 20
missing=""
for m in run_info val_loss learning_rate tokens_per_second grad_norm loss_scale skipped_steps_total peak_rss_bytes \
    last_checkpoint_timestamp_seconds; do
    [ -n "$(value "$m" a.values)" ] || missing+=" $m"
done
same "(a) the other metrics are there" "$missing" ""
has "(a) labels: run id and name, job, rank" "$(grep '^dtrun_step{' a/metrics.prom)" \
    "{run_id=\"$(sed -n 's/.*"run_id":"\([0-9a-f]*\)".*/\1/p' <<<"$last")\",run_name=\"gpt-tiny\",job_id=\"${SLURM_JOB_ID:-}\",rank=\"0\"}"
same "(a) no temporary file left" "$(ls a | grep -v -x -e ckpt -e config.yaml -e events.jsonl)" "metrics.prom"

# ---- (b) copies taken while a run rewrites the file every step are each whole: the run renames
# every version into place, so a reader never sees one half written
mkdir copies
"$DTRUN" run "${tiny[@]}" run.dir=b run.max_duration=300ba events.interval=1ba checkpoint.dir=null \
    events.prometheus=metrics.prom >b.out 2>b.err &
job=$!
i=0
while kill -0 "$job" 2>/dev/null; do
    if [ -e b/metrics.prom ]; then
        i=$((i + 1))
        cat b/metrics.prom >"copies/$i.prom"
    fi
    sleep 0.01
done
wait "$job"
same "(b) the run ends well" "$?" 0
[ "$i" -ge 2 ] && ok "(b) $i copies taken while it ran" || not_ok "(b) only $i copies taken" "$(tail -n 5 b.err)"
well_formed "(b) every copy" copies/*.prom b/metrics.prom
running=$(grep -l '^dtrun_running{.*} 1$' copies/*.prom | wc -l)
[ "$running" -ge 1 ] && ok "(b) $running copies say it is running" || not_ok "(b) no copy says it is running"
same "(b) the last says step 300, ended" "$($PY prom.py show b/metrics.prom | awk '$1 == "dtrun_step" || $1 == "dtrun_running" { print $2 }' | tr '\n' ' ')" "0 300 "

# ---- (c) an absolute path, as a textfile collector's directory is, made when missing
run "(c) events.prometheus=$TMP/textfile/dtrun.prom" 0 "$DTRUN" run "${tiny[@]}" run.dir=c run.max_duration=5ba \
    checkpoint.dir=null events.prometheus="$TMP/textfile/dtrun.prom"
well_formed "(c) textfile/dtrun.prom" textfile/dtrun.prom
same "(c) only it there" "$(ls textfile)" "dtrun.prom"

# ---- (d) the collector reads *.prom only: another name is refused before training, with the fix
run "(d) events.prometheus=metrics.txt" 2 "$DTRUN" run "${tiny[@]}" run.dir=d run.max_duration=5ba \
    events.prometheus=metrics.txt
same "(d) ... says so, and how to fix it" "$err" "d/metrics.txt: error: events.prometheus must end in .prom: \
node_exporter's textfile collector reads only *.prom files
  hint: events.prometheus=metrics.prom"

# ---- (e) a directory that cannot be written (a file where it should be): one warning, the run goes on
echo "a file" >notadir
run "(e) events.prometheus in an unwritable directory" 0 "$DTRUN" run "${tiny[@]}" run.dir=e run.max_duration=20ba \
    events.interval=5ba checkpoint.dir=null events.prometheus="$TMP/notadir/m.prom"
same "(e) one warning" "$(grep -c 'warning: .*/notadir/m.prom: cannot create the temporary file' <<<"$err")" 1
has "(e) ... with the fix" "$err" "hint: make the directory writable, or set events.prometheus to a file in one that is"
same "(e) events.jsonl has every record" "$(grep -c '"type":"metrics"' e/events.jsonl) $(grep -c run_finished e/events.jsonl)" "4 1"
finish
