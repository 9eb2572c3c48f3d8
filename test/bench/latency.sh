#!/usr/bin/env bash
# Commit -> woken reader latency (SPEC §9 row 3) for cfeed.wait,
# cfeed.read(wait_ms), LISTEN on the cfeed channel, a raw NOTIFY round trip
# (the floor), and the peers: PgQ (pgq.ticker() in a loop every 1 ms, queue
# tuned to tick on every event, idle ticks every ~20 ms, consumer polling next_batch every POLL_MS)
# and a wal2json slot polled every POLL_MS; each RUNS runs, under a
# background load of ~1000 tx/s.  Samples go to $LATENCY_DUMP if set.
# Usage: bash test/bench/latency.sh [samples]
. "$(dirname "$0")/lib.sh"
SAMPLES=${1:-500}
RUNS=${RUNS:-3}
export POLL_MS=${POLL_MS:-10}
cc -O2 -Wall -o "$BENCH_DIR/latency" "$(dirname "$0")/latency.c" \
	-I"$(pg_config --includedir)" -L"$(pg_config --libdir)" -lpq
modes="notify wait read listen"
have_pgq && modes="$modes pgq" || echo "latency: PgQ not installed, row skipped"
have_wal2json && modes="$modes logical" || echo "latency: wal2json not installed, row skipped"
BENCH_EXTRA_CONF="$LOGICAL_CONF" bench_start
bench_settings
psqlc -c "CREATE EXTENSION cfeed" -c "SELECT cfeed.create_feed('probe', 1)" \
	-c "SELECT cfeed.create_feed('load', 4)" -c "CREATE TABLE lat_probe (x int)" >/dev/null
printf '%s\n' '\set s random(0, 3)' 'SELECT cfeed.publish(2, :s);' > "$BENCH_DIR/load.sql"
chmod 644 "$BENCH_DIR/load.sql"
pgbenchc -n -c 4 -j 2 -R 1000 -T 3600 -f "$BENCH_DIR/load.sql" >/dev/null 2>&1 &
load=$!
sleep 1
conninfo="host=$BENCH_DIR port=$BENCH_PORT dbname=postgres"
[ -n "${LATENCY_DUMP:-}" ] && : > "$LATENCY_DUMP" && chmod 666 "$LATENCY_DUMP"
for mode in ${MODES:-$modes}; do
	case $mode in
	pgq)	# tick on every event (checked every 1 ms), idle ticks every ~20 ms;
		# a first event, as pgq does not tick for the queue's very first one
		psqlc -c "CREATE EXTENSION IF NOT EXISTS pgq" -c "SELECT pgq.create_queue('lat')" \
			-c "SELECT pgq.insert_event('lat', 'x', '0')" \
			-c "SELECT pgq.set_queue_config('lat', 'ticker_max_count', '1')" \
			-c "SELECT pgq.set_queue_config('lat', 'ticker_max_lag', '20 ms')" \
			-c "SELECT pgq.set_queue_config('lat', 'ticker_idle_period', '20 ms')" \
			-c "SELECT pgq.register_consumer('lat', 'c')" >/dev/null
		bg_sql ticker "DO \$\$ BEGIN LOOP PERFORM pgq.ticker('lat'); COMMIT; PERFORM pg_sleep(0.001); END LOOP; END \$\$";;
	logical)
		psqlc -c "SELECT pg_create_logical_replication_slot('lat', 'wal2json')" >/dev/null;;
	esac
	for run in $(seq 1 "$RUNS"); do
		as_pg "$BENCH_DIR/latency" "$conninfo" "$mode" "$SAMPLES" 1 \
			$([ "$run" = 1 ] && echo "${LATENCY_DUMP:-}") | sed "s/^/run $run: /"
	done
	case $mode in
	pgq) stop_bg ticker;;
	logical) psqlc -c "SELECT pg_drop_replication_slot('lat')" >/dev/null;;
	esac
done
kill $load 2>/dev/null || true
wait 2>/dev/null || true
