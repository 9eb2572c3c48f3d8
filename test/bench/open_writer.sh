#!/usr/bin/env bash
# A writer transaction left open while others write (row 5, test/bench/README.md): one
# session publishes to shard 0 and stays open SECS seconds while 4 pgbench
# clients publish to the same shard.  The head, sampled 4 times while the
# writer is open, must rise every time (the feed never stalls); the late
# change must get a number above every number stamped while it was open;
# the shard must be gapless (never skips).
# Usage: bash test/bench/open_writer.sh [seconds]
. "$(dirname "$0")/lib.sh"
SECS=${1:-20}
bench_start
bench_settings
psqlc -c "CREATE EXTENSION cfeed" -c "SELECT cfeed.create_feed('f', 1)" >/dev/null
sql_file w.sql "SELECT cfeed.publish(1, 0);"
as_pg psql -X -q -At -h "$BENCH_DIR" -p "$BENCH_PORT" -d postgres \
	-c "BEGIN" -c "SELECT cfeed.publish(1, 0)" -c "SELECT pg_sleep($SECS)" -c "COMMIT" > "$BENCH_DIR/late" &
late_pid=$!
sleep 0.5
heads=$(psqlc -c "SELECT cfeed.head(1, 0)")
pgbenchc -n -c 4 -j 2 -T $((SECS - 2)) -f "$BENCH_DIR/w.sql" >/dev/null 2>&1 &
load_pid=$!
for _ in 1 2 3 4; do
	sleep "$(calc "($SECS - 2) / 4" 1)"
	heads="$heads $(psqlc -c "SELECT cfeed.head(1, 0)")"
done
wait "$load_pid" "$late_pid"
sleep 1
cid=$(head -1 "$BENCH_DIR/late")
late=$(psqlc -c "SELECT change_sequence_number FROM cfeed.change WHERE change_id = $cid")
gapless=$(psqlc -c "SELECT count(*) = max(change_sequence_number) - min(change_sequence_number) + 1 AND count(DISTINCT change_sequence_number) = count(*) FROM cfeed.change WHERE feed_id = 1 AND shard = 0")
rising=$(echo "$heads" | tr ' ' '\n' | awk 'NR > 1 && $1 <= prev {bad = 1} {prev = $1} END {print bad ? "f" : "t"}')
h0=${heads%% *}; h1=${heads##* }
echo "head while the writer was open: $heads"
echo "late change $cid stamped $late; head rising: $rising; gapless: $gapless"
result "5. writer left open ${SECS}s, 4 others writing" "feed keeps advancing, never skips; late change gets a later number" \
	"head +$((h1 - h0)) while open (rising at each of 4 samples: $rising); gapless: $gapless; late change = last head sampled while open +$((late - h1))" \
	"head $h0 when it opened" "-" "$([ "$rising$gapless" = tt ] && yesno "$late > $h1" || echo no)"
