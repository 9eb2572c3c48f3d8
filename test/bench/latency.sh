#!/usr/bin/env bash
# Commit -> woken reader latency (row 3a, test/bench/README.md), RUNS runs of SAMPLES each,
# the modes alternated within each run, under a background load of ~1000
# publishes/s on another feed: cfeed.wait,
# cfeed.read(wait_ms), LISTEN on the shard's channel, a raw NOTIFY round trip
# (the floor: a transaction that writes no WAL, whose commit is not
# flushed), the same NOTIFY sent with a row (a flushed commit, as the
# sweep's), and the peers: PgQ (pgq.ticker() called every 1 ms, ticking
# on every event and idle-ticking every POLL_MS: idle ticks at 1-5 ms
# measured no better on 2 cores, where the ticks' own commits compete; the
# consumer polls every POLL_MS, see latency.c) and a wal2json slot polled
# every POLL_MS.  A run in which a sample is not delivered within 10 s
# prints FAILED.  The samples of every run go to $LATENCY_DUMP if set
# ("mode ms" lines).
# Usage: bash test/bench/latency.sh [samples]   (MODES, RUNS, POLL_MS: env)
. "$(dirname "$0")/lib.sh"
SAMPLES=${1:-500}
RUNS=${RUNS:-3}
export POLL_MS=${POLL_MS:-10}
cc_tool latency
modes="notify notifywal wait read listen"
if have_pgq; then modes="$modes pgq"; else echo "latency: PgQ not installed, row skipped"; fi
if have_wal2json; then modes="$modes logical"; else echo "latency: wal2json not installed, row skipped"; fi
BENCH_EXTRA_CONF="$LOGICAL_CONF" bench_start
bench_settings
psqlc -c "CREATE EXTENSION cfeed" -c "SELECT cfeed.create_feed('probe', 1)" \
	-c "SELECT cfeed.create_feed('load', 4)" -c "CREATE TABLE lat_probe (x int)" >/dev/null
sql_file load.sql '\set s random(0, 3)' 'SELECT cfeed.publish(2, :s);'
pgbenchc -n -c 4 -j 2 -R 1000 -T 3600 -f "$BENCH_DIR/load.sql" >/dev/null 2>&1 &
sleep 1
# PgQ's queue and the wal2json slot exist throughout; PgQ's ticker runs only
# during PgQ's runs (its 1 ms loop would load the other modes' runs).
wants() { [[ " ${MODES:-$modes} " == *" $1 "* ]]; }
if wants pgq; then
	# a first event, as PgQ does not tick for a queue's very first one
	psqlc -c "CREATE EXTENSION IF NOT EXISTS pgq" -c "SELECT pgq.create_queue('lat')" \
		-c "SELECT pgq.insert_event('lat', 'x', '0')" \
		-c "SELECT pgq.set_queue_config('lat', 'ticker_max_count', '1')" \
		-c "SELECT pgq.set_queue_config('lat', 'ticker_max_lag', '$POLL_MS ms')" \
		-c "SELECT pgq.set_queue_config('lat', 'ticker_idle_period', '$POLL_MS ms')" \
		-c "SELECT pgq.register_consumer('lat', 'c')" >/dev/null
fi
if wants logical; then
	psqlc -c "SELECT pg_create_logical_replication_slot('lat', 'wal2json')" >/dev/null
fi
# Runs alternate between the modes, so that a change in the machine's load
# hits every mode alike; each cfeed mode is compared with the raw NOTIFY of
# its own run.
for run in $(seq 1 "$RUNS"); do
	for mode in ${MODES:-$modes}; do
		[ "$mode" != pgq ] || bg_sql ticker "DO \$\$ BEGIN LOOP PERFORM pgq.ticker('lat'); COMMIT; PERFORM pg_sleep(0.001); END LOOP; END \$\$"
		as_pg "$BENCH_DIR/latency" "$CONNINFO" "$mode" "$SAMPLES" 1 "$BENCH_DIR/samples" 2>&1 |
			sed "s/^/run $run: /" || echo "run $run: $mode FAILED"
		[ "$mode" != pgq ] || stop_bg ticker
	done
done
# the postgres user may not reach the caller's directory
if [ -n "${LATENCY_DUMP:-}" ]; then cp "$BENCH_DIR/samples" "$LATENCY_DUMP"; fi
