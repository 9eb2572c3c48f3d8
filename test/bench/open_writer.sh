#!/usr/bin/env bash
# A writer transaction left open while others write (SPEC §9 row 7): one
# session publishes to shard 0 and stays open SECS seconds while pgbench
# publishes to the same shard; the head is printed as it advances, then the
# late change's number is checked to be above every number stamped while it
# was open, and the shard is checked gapless.
# Usage: bash test/bench/open_writer.sh [seconds]
. "$(dirname "$0")/lib.sh"
SECS=${1:-20}
bench_start
bench_settings
psqlc -c "CREATE EXTENSION cfeed" -c "SELECT cfeed.create_feed('f', 1)" >/dev/null
echo "SELECT cfeed.publish(1, 0);" > "$BENCH_DIR/w.sql"; chmod 644 "$BENCH_DIR/w.sql"
as_pg psql -X -q -At -h "$BENCH_DIR" -p "$BENCH_PORT" -d postgres \
	-c "BEGIN" -c "SELECT cfeed.publish(1, 0)" -c "SELECT pg_sleep($SECS)" -c "COMMIT" > "$BENCH_DIR/late" &
late_pid=$!
sleep 0.5
h0=$(psqlc -c "SELECT cfeed.head(1, 0)")
pgbenchc -n -c 4 -j 2 -T $((SECS - 2)) -f "$BENCH_DIR/w.sql" >/dev/null 2>&1 &
heads="$h0"
for i in 1 2 3; do sleep $(( (SECS - 2) / 3 )); heads="$heads $(psqlc -c "SELECT cfeed.head(1, 0)")"; done
wait
sleep 1
h1=$(psqlc -c "SELECT cfeed.head(1, 0)")
cid=$(head -1 "$BENCH_DIR/late")
late=$(psqlc -c "SELECT change_sequence_number FROM cfeed.change WHERE change_id = $cid")
gapless=$(psqlc -c "SELECT count(*) = max(change_sequence_number) - min(change_sequence_number) + 1 AND count(DISTINCT change_sequence_number) = count(*) FROM cfeed.change WHERE feed_id = 1 AND shard = 0")
echo "head while the writer was open: $heads; after it committed: $h1"
echo "late change $cid stamped $late; gapless: $gapless"
ok=$([ "$late" -gt "${heads##* }" ] && [ "${heads##* }" -gt "$h0" ] && [ "$gapless" = t ] && echo yes || echo no)
result "writer left open ${SECS}s, others writing" "feed advances; late change gets a later number" \
	"head +$(( ${heads##* } - h0 )) while open; late change = head-at-commit +$(( late - ${heads##* } ))" \
	"head $h0 before" "-" "$ok"
