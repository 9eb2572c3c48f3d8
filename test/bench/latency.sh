#!/usr/bin/env bash
# Commit -> woken reader latency (SPEC §9 row 3) for cfeed.wait,
# cfeed.read(wait_ms), LISTEN on the cfeed channel, and a raw NOTIFY round
# trip (the floor), each 3 runs, under a background load of ~1000 tx/s.
# Usage: bash test/bench/latency.sh [samples]
. "$(dirname "$0")/lib.sh"
SAMPLES=${1:-500}
cc -O2 -Wall -o "$BENCH_DIR/latency" "$(dirname "$0")/latency.c" \
	-I"$(pg_config --includedir)" -L"$(pg_config --libdir)" -lpq
bench_start
bench_settings
psqlc -c "CREATE EXTENSION cfeed" -c "SELECT cfeed.create_feed('probe', 1)" \
	-c "SELECT cfeed.create_feed('load', 4)" >/dev/null
printf '%s\n' '\set s random(0, 3)' 'SELECT cfeed.publish(2, :s);' > "$BENCH_DIR/load.sql"
chmod 644 "$BENCH_DIR/load.sql"
pgbenchc -n -c 4 -j 2 -R 1000 -T 600 -f "$BENCH_DIR/load.sql" >/dev/null 2>&1 &
load=$!
sleep 1
conninfo="host=$BENCH_DIR port=$BENCH_PORT dbname=postgres"
for mode in ${MODES:-notify wait read listen}; do
	for run in $(seq 1 ${RUNS:-3}); do
		as_pg "$BENCH_DIR/latency" "$conninfo" "$mode" "$SAMPLES" 1
	done
done
kill $load 2>/dev/null || true
wait 2>/dev/null || true
