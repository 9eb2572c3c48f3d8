#!/usr/bin/env bash
# Tracked-table write cost (issue 6 budget: a tracked INSERT costs at most
# 1.3x an untracked one): the same table untracked and tracked by
# cfeed.track() (change + row image per row), background sweeper stamping:
# pgbench TPS of single-row INSERTs and of 100-row INSERTs (where the
# per-row trigger cost is not hidden behind the commit), CLIENTS clients;
# and one 200k-row INSERT.  Ratios are untracked / tracked cost.
# Usage: bash test/bench/track.sh [seconds] [clients]
# BENCH_FSYNC=off measures CPU cost rather than commit-bound throughput.
. "$(dirname "$0")/lib.sh"
SECS=${1:-10}
CLIENTS=${2:-8}
bench_start
bench_settings
psqlc -c "CREATE EXTENSION cfeed" -c "SELECT cfeed.create_feed('bench', 4)" \
	-c "CREATE TABLE plain (id bigserial PRIMARY KEY, payload text, change_id bigint)" \
	-c "CREATE TABLE tracked (id bigserial PRIMARY KEY, payload text, change_id bigint)" \
	-c "SELECT cfeed.track('tracked', 1)" >/dev/null
for t in plain tracked; do
	sql_file "$t.sql" "INSERT INTO $t (payload) VALUES ('hello');"
	sql_file "${t}100.sql" "INSERT INTO $t (payload) SELECT 'hello' FROM generate_series(1, 100);"
done
plain=$(tps "$CLIENTS" "$SECS" plain.sql)
tracked=$(tps "$CLIENTS" "$SECS" tracked.sql)
plain100=$(tps "$CLIENTS" "$SECS" plain100.sql)
tracked100=$(tps "$CLIENTS" "$SECS" tracked100.sql)
bulk()
{
	local t0
	t0=$(now_ms)
	psqlc -c "INSERT INTO $1 (payload) SELECT 'hello' FROM generate_series(1, 200000)"
	echo $(( $(now_ms) - t0 ))
}
bulk_plain=$(bulk plain)
bulk_tracked=$(bulk tracked)
echo "single-row INSERT, $CLIENTS clients: untracked $plain tps, tracked $tracked tps; cost $(calc "$plain / $tracked")×"
echo "100-row INSERT, $CLIENTS clients: untracked $plain100 tps, tracked $tracked100 tps; cost $(calc "$plain100 / $tracked100")×"
echo "one 200k-row INSERT: untracked $bulk_plain ms, tracked $bulk_tracked ms; cost $(calc "$bulk_tracked / $bulk_plain")×"
result "tracked vs untracked INSERT (issue 6), $CLIENTS clients" "tracked cost ≤ 1.3× untracked" \
	"tracked $tracked tps; 100-row INSERTs $tracked100 tps; one 200k-row INSERT $bulk_tracked ms" \
	"untracked $plain tps; $plain100 tps; $bulk_plain ms" \
	"cost $(calc "$plain / $tracked")×; $(calc "$plain100 / $tracked100")×; $(calc "$bulk_tracked / $bulk_plain")×" \
	"$(yesno "$plain <= 1.3 * $tracked")"
