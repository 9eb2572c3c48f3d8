#!/usr/bin/env bash
# Many feeds (SPEC §9 row 6): 1 load feed vs 1,000 load feeds x 4 shards,
# same sparse traffic (RATE changes/s on random shards): commit -> cfeed.wait
# woken latency on a separate probe feed, and the sweeper's CPU per change
# (from /proc/PID/schedstat).
# Usage: bash test/bench/feeds1000.sh [seconds] [rate]
. "$(dirname "$0")/lib.sh"
SECS=${1:-10}
RATE=${2:-200}
cc -O2 -Wall -o "$BENCH_DIR/latency" "$(dirname "$0")/latency.c" \
	-I"$(pg_config --includedir)" -L"$(pg_config --libdir)" -lpq
bench_start
bench_settings
psqlc -c "CREATE EXTENSION cfeed" -c "SELECT cfeed.create_feed('probe', 1)" -c "SELECT cfeed.create_feed('load1', 4)" >/dev/null
conninfo="host=$BENCH_DIR port=$BENCH_PORT dbname=postgres"
phase()
{
	local feeds=$1 pid c0 s0 c1 s1 lat
	printf '%s\n' "\\set f random(2, $((feeds + 1)))" '\set s random(0, 3)' 'SELECT cfeed.publish(:f, :s);' > "$BENCH_DIR/load.sql"
	chmod 644 "$BENCH_DIR/load.sql"
	sleep 1.5
	pid=$(psqlc -c "SELECT pid FROM cfeed.sweepers LIMIT 1")
	c0=$(cpu_us "$pid"); s0=$(psqlc -c "SELECT sum(changes_stamped) FROM cfeed.sweepers")
	pgbenchc -n -c 2 -j 2 -R "$RATE" -T "$SECS" -f "$BENCH_DIR/load.sql" >/dev/null 2>&1 &
	lat=$(as_pg "$BENCH_DIR/latency" "$conninfo" wait 300 1)
	wait $!
	sleep 0.5
	c1=$(cpu_us "$pid"); s1=$(psqlc -c "SELECT sum(changes_stamped) FROM cfeed.sweepers")
	echo "$feeds load feeds x 4 shards: $lat; sweeper $(( (c1 - c0) / (s1 - s0) )) us CPU/change ($((s1 - s0)) changes)" >&2
	echo "$(echo "$lat" | sed 's/.*p50=\([0-9.]*\).*p99=\([0-9.]*\).*/\1 \2/') $(( (c1 - c0) / (s1 - s0) ))"
}
read -r p50a p99a cpua < <(phase 1)
psqlc -c "SELECT count(cfeed.create_feed('load' || g, 4)) FROM generate_series(2, 1000) g" >/dev/null
read -r p50b p99b cpub < <(phase 1000)
ok=$([ "$(calc "$p50b <= 2 * $p50a && $p99b <= 2 * $p99a && $cpub <= 2 * $cpua")" = 1 ] && echo yes || echo no)
result "1,000 feeds x 4 shards, sparse ($RATE/s)" "latency ≤ 2× 1 feed; sweep cost/change flat" \
	"p50 $p50b / p99 $p99b ms; $cpub us/change" "1 feed: p50 $p50a / p99 $p99a ms; $cpua us/change" \
	"$(calc "$p50b / $p50a") p50, $(calc "$p99b / $p99a") p99, $(calc "$cpub / $cpua") CPU" "$ok"
