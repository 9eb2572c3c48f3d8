#!/usr/bin/env bash
# Tracked-table write overhead (issue 6 budget: a tracked INSERT costs at
# most 1.3x an untracked one): pgbench TPS of single-row INSERTs into an
# untracked table and into the same table tracked by cfeed.track() (change +
# row image per row), same clients, same run, the background sweeper
# stamping meanwhile.  Prints the cost ratio untracked_tps / tracked_tps.
# Also a multi-row variant (100 rows per INSERT), where per-row trigger cost
# is not hidden behind commit, and a COPY-like bulk load.
# Usage: bash test/bench/track.sh [seconds] [clients]
# BENCH_FSYNC=off measures CPU cost rather than commit-bound throughput.
. "$(dirname "$0")/lib.sh"
SECS=${1:-10}
CLIENTS=${2:-8}
bench_start
bench_settings
psqlc -c "CREATE EXTENSION cfeed" -c "SELECT cfeed.create_feed('bench', 4)" >/dev/null
psqlc -c "CREATE TABLE plain (id bigserial PRIMARY KEY, payload text, change_id bigint)" \
      -c "CREATE TABLE tracked (id bigserial PRIMARY KEY, payload text, change_id bigint)" \
      -c "SELECT cfeed.track('tracked', 1)" >/dev/null
for t in plain tracked; do
	echo "INSERT INTO $t (payload) VALUES ('hello');" > "$BENCH_DIR/$t.sql"
	echo "INSERT INTO $t (payload) SELECT 'hello' FROM generate_series(1, 100);" > "$BENCH_DIR/${t}100.sql"
done
chmod 644 "$BENCH_DIR"/*.sql
run()
{
	pgbenchc -n -c "$CLIENTS" -j 2 -T "$SECS" -f "$BENCH_DIR/$1.sql" 2>/dev/null | sed -n 's/^tps = \([0-9.]*\).*/\1/p'
}
psqlc -c "CHECKPOINT"
plain=$(run plain)
psqlc -c "CHECKPOINT"
tracked=$(run tracked)
psqlc -c "CHECKPOINT"
plain100=$(run plain100)
psqlc -c "CHECKPOINT"
tracked100=$(run tracked100)
bulk()
{
	local s e
	s=$(now_ms)
	psqlc -c "INSERT INTO $1 (payload) SELECT 'hello' FROM generate_series(1, 200000)"
	e=$(now_ms)
	echo $((e - s))
}
bulk_plain=$(bulk plain)
bulk_tracked=$(bulk tracked)
psqlc -c "SELECT count(*) FROM cfeed.sweep()" >/dev/null
pending=$(psqlc -c "SELECT count(*) FROM cfeed.change WHERE change_sequence_number IS NULL")
echo "single-row INSERT, $CLIENTS clients: untracked $plain tps, tracked $tracked tps;" \
	"cost ratio tracked/untracked $(echo "scale=2; $plain / $tracked" | bc)x"
echo "100-row INSERT, $CLIENTS clients: untracked $plain100 tps, tracked $tracked100 tps;" \
	"cost ratio $(echo "scale=2; $plain100 / $tracked100" | bc)x"
echo "one 200k-row INSERT: untracked $bulk_plain ms, tracked $bulk_tracked ms;" \
	"cost ratio $(echo "scale=2; $bulk_tracked / $bulk_plain" | bc)x"
echo "left pending at the end: $pending"
