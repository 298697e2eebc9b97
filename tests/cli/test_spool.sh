#!/usr/bin/env bash
# A spool whose last record was torn by a crash mid-write (issue #17): the torn record is set
# aside in events.spool.invalid and named in one warning with its byte offset, every complete
# record is delivered, and no file is left that refers to a spool that is gone.
. "$(dirname "$0")/tap.sh"
. "$(dirname "$0")/receiver.sh"
cd "$TMP" || exit 1
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$TMP"' EXIT
tiny=(model.n_layer=1 model.n_embd=32 model.n_head=2 model.seq_len=16 data.micro_batch_size=4 run.eval_interval=0ba
    events.interval=1ba run.max_duration=40ba)
run "a run to take events from" 0 "$DTRUN" run "${tiny[@]}" run.dir=r
# what a crash mid-write leaves: whole records, then part of one, then a few bytes of junk
head -c 2000 r/events.jsonl >r/events.spool
printf 'x\001junk' >>r/events.spool
whole=$(head -c 2000 r/events.jsonl | grep -c '}$')
torn_at=$(head -c 2000 r/events.jsonl | head -n "$whole" | wc -c)
receiver ok --out got.jsonl
run "dtrun events flush of the torn spool" 0 "$DTRUN" events flush r events.webhook.url="http://127.0.0.1:$port/"
has "every complete record delivered, none left" "$out" "r/events.spool: $whole delivered, 0 left"
same "the warning names the file, the count and the byte offset" \
    "$(grep -c "warning: r/events.spool: 1 invalid record set aside in r/events.spool.invalid (the first at byte $torn_at, torn, no end of line: " <<<"$err")" 1
same "said once" "$(grep -c 'invalid record' <<<"$err")" 1
head -n "$whole" r/events.jsonl >want.jsonl
same "the receiver got exactly the complete records, in order" "$(delivered got.jsonl want.jsonl)" \
    "$whole events, 0 missing, 0 unexpected, order ok"
cmp -s r/events.spool.invalid <(tail -c +$((torn_at + 1)) <(head -c 2000 r/events.jsonl; printf 'x\001junk'); echo) &&
    ok "the torn bytes are kept, as they were, in events.spool.invalid" || not_ok "events.spool.invalid holds other bytes"
[ ! -e r/events.spool ] && [ ! -e r/events.spool.offset ] && ok "no spool and no offset file left" ||
    not_ok "left behind: $(ls r)"

# a record in the middle that is not JSON (bytes that were never a record) is set aside the same way
head -n 3 r/events.jsonl >r/events.spool
echo 'not json at all' >>r/events.spool
sed -n 4,5p r/events.jsonl >>r/events.spool
run "a spool with a line that is not JSON" 0 "$DTRUN" events flush r events.webhook.url="http://127.0.0.1:$port/"
has "the five records go out" "$out" "r/events.spool: 5 delivered, 0 left"
has "the bad line is named with its offset" "$err" "(the first at byte $(head -n 3 r/events.jsonl | wc -c), not a JSON document: 15 bytes: \"not json at all\")"
same "and kept" "$(tail -1 r/events.spool.invalid)" "not json at all"

# a whole last record that lost only its newline is sent, not set aside
head -n 2 r/events.jsonl >r/events.spool
sed -n 3p r/events.jsonl | tr -d '\n' >>r/events.spool
run "a last record without its newline" 0 "$DTRUN" events flush r events.webhook.url="http://127.0.0.1:$port/"
has "all three delivered" "$out" "r/events.spool: 3 delivered, 0 left"
same "nothing set aside" "$(grep -c 'invalid record' <<<"$err")" 0
stop_receiver
finish
