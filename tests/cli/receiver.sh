# receiver.sh - helpers for tests that talk to tests/receiver.py (sourced after tap.sh):
#   receiver MODE [ARGS...]   one on a free port; sets $port and $rpid
#   stop_receiver, mode MODE, stat_of KEY, free_port
#   delivered RECEIVED EVENTS_JSONL   what arrived against what the run wrote, by id
PY=/usr/bin/python3
RECEIVER=$DT_SRCDIR/tests/receiver.py

# receiver MODE [ARGS...]: one on a free port; sets $port and $rpid
receiver() {
    local mode=$1
    shift
    rm -f port
    $PY "$RECEIVER" --port-file port --mode "$mode" "$@" &
    rpid=$!
    for _ in $(seq 200); do [ -s port ] && break; sleep 0.05; done
    port=$(cat port)
}
stop_receiver() {
    kill "$rpid" 2>/dev/null
    wait "$rpid" 2>/dev/null
}
mode() { curl -s -X POST --data "$1" "http://127.0.0.1:$port/_mode" >/dev/null; }
stat_of() { curl -s "http://127.0.0.1:$port/_stats" | $PY -c "import json, sys; print(json.load(sys.stdin)['$1'])"; }
free_port() { $PY -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
# delivered RECEIVED EVENTS_JSONL: what arrived against what the run wrote, by id
delivered() {
    $PY - "$1" "$2" <<'EOF'
import json, sys
got = [json.loads(l) for l in open(sys.argv[1])]
got = [g["id"] for g in got if "id" in g]
want = [json.loads(l)["id"] for l in open(sys.argv[2])]
first, seen = [], set()
for i in got:
    if i not in seen:
        seen.add(i)
        first.append(i)
last, order = {}, "ok"
for i in first:  # in order per rank: each rank's sequence numbers rise in order of arrival
    run, rank, n = i.rsplit("-", 2)
    if last.get((run, rank), 0) >= int(n):
        order = "broken"
    last[(run, rank)] = int(n)
print("%d events, %d missing, %d unexpected, order %s" % (len(seen), len(set(want) - seen), len(seen - set(want)), order))
EOF
}
