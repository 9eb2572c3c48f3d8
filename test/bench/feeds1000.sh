#!/usr/bin/env bash
# Many feeds (row 4c, test/bench/README.md): sparse traffic (RATE publishes/s on random
# shards) over 1 load feed x 4 shards, then over 1,000 load feeds x 4 shards:
# commit -> cfeed.wait woken latency on a separate probe feed meanwhile (3
# probe runs of 300 samples: median p50 and p99), and the sweeper's CPU per
# change stamped in the window (/proc schedstat).
# Usage: bash test/bench/feeds1000.sh [seconds] [rate]
. "$(dirname "$0")/lib.sh"
SECS=${1:-10}
RATE=${2:-200}
cc_tool latency
bench_start
bench_settings
psqlc -c "CREATE EXTENSION cfeed" -c "SELECT cfeed.create_feed('probe', 1)" -c "SELECT cfeed.create_feed('load1', 4)" >/dev/null
# lat_median LINES KEY: the median of KEY=value over the probe's output lines
lat_median() { echo "$1" | sed -n "s/.* $2=\([0-9.]*\).*/\1/p" | median; }
# phase FEEDS: prints "p50 p99 cpu_us_per_change" (details on stderr)
phase()
{
	local feeds=$1 pid c0 s0 c1 s1 lat load
	sql_file load.sql "\\set f random(2, $((feeds + 1)))" '\set s random(0, 3)' 'SELECT cfeed.publish(:f, :s);'
	sleep 1.5	# the sweeper has seen the new shards
	pid=$(psqlc -c "SELECT pid FROM cfeed.sweepers")
	c0=$(cpu_us "$pid"); s0=$(psqlc -c "SELECT changes_stamped FROM cfeed.sweepers")
	pgbenchc -n -c 2 -j 2 -R "$RATE" -T "$SECS" -f "$BENCH_DIR/load.sql" >/dev/null 2>&1 &
	load=$!
	lat=$(for _ in 1 2 3; do as_pg "$BENCH_DIR/latency" "$CONNINFO" wait 300 1; done)
	wait "$load"
	sleep 0.5
	c1=$(cpu_us "$pid"); s1=$(psqlc -c "SELECT changes_stamped FROM cfeed.sweepers")
	echo "$lat" | sed "s/^/$feeds load feeds x 4 shards: /" >&2
	echo "$feeds load feeds x 4 shards: sweeper $(( (c1 - c0) / (s1 - s0) )) us CPU/change ($((s1 - s0)) changes)" >&2
	echo "$(lat_median "$lat" p50) $(lat_median "$lat" p99) $(( (c1 - c0) / (s1 - s0) ))"
}
read -r p50a p99a cpua < <(phase 1)
psqlc -c "SELECT count(cfeed.create_feed('load' || g, 4)) FROM generate_series(2, 1000) g" >/dev/null
read -r p50b p99b cpub < <(phase 1000)
result "4c. 1,000 feeds × 4 shards, sparse ($RATE changes/s)" "latency ≤ 2× 1 feed; sweep cost per change flat" \
	"cfeed.wait p50 $p50b / p99 $p99b ms; sweeper $cpub µs CPU/change" "1 feed × 4 shards: p50 $p50a / p99 $p99a ms; $cpua µs/change" \
	"p50 $(calc "$p50b / $p50a")×, p99 $(calc "$p99b / $p99a")×, CPU $(calc "$cpub / $cpua")×" \
	"$(yesno "$p50b <= 2 * $p50a && $p99b <= 2 * $p99a && $cpub <= 2 * $cpua")"
