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
# ("mode ms" lines).  Row 3a: per run, a cfeed mode's p50 and p99 against
# those of the NOTIFY sent with a row of the same run (the durable floor),
# the median over the runs judged (p50 ≤ 1.2×, p99 ≤ 2×); the ratios to
# the raw NOTIFY beside; each mode's p50/p90/p99/max as min-max over the
# runs.
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
done | tee "$BENCH_DIR/runs"
# the postgres user may not reach the caller's directory
if [ -n "${LATENCY_DUMP:-}" ]; then cp "$BENCH_DIR/samples" "$LATENCY_DUMP"; fi
# The rows, from the runs' lines ("run R: MODE n=... p50=... p90=... p99=... max=...").
awk '
function seen(m) { if (!(m in runs)) { order[++n] = m; runs[m] = 0 } }
/^run [0-9]+: [a-z]+ FAILED$/ { seen($3); failed[$3]++ }
/^run [0-9]+: [a-z]+ +n=/ {
	m = $3; seen(m); r = ++runs[m]; run_of[m, r] = $2 + 0
	for (f = 5; f <= 8; f++) { split($f, kv, "="); v[m, f, r] = kv[2] + 0 }
}
function lo(m, f,  r, x) { x = v[m, f, 1]; for (r = 2; r <= runs[m]; r++) if (v[m, f, r] < x) x = v[m, f, r]; return x }
function hi(m, f,  r, x) { x = v[m, f, 1]; for (r = 2; r <= runs[m]; r++) if (v[m, f, r] > x) x = v[m, f, r]; return x }
function span(m, f) { return runs[m] ? sprintf("%.2f–%.2f", lo(m, f), hi(m, f)) : "n/a" }
# the median over the runs of m/floor in field f, the floor taken from the same run
function ratio(m, f, floor,  r, k, i, j, t, a, nr) {
	nr = 0
	for (r = 1; r <= runs[m]; r++)
		for (k = 1; k <= runs[floor]; k++)
			if (run_of[floor, k] == run_of[m, r] && v[floor, f, k] > 0)
				a[++nr] = v[m, f, r] / v[floor, f, k]
	for (i = 1; i <= nr; i++) for (j = i + 1; j <= nr; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
	return nr ? a[int((nr + 1) / 2)] : 0
}
END {
	name["notify"] = "raw NOTIFY round trip (the floor)"; name["wait"] = "cfeed.wait"
	name["notifywal"] = "NOTIFY sent with a row, its commit flushed (the floor with a WAL flush)"
	name["read"] = "cfeed.read(wait_ms)"; name["listen"] = "LISTEN on the shard channel"
	name["pgq"] = "PgQ, ticker every 1 ms, idle ticks and consumer polls every 10 ms"
	name["logical"] = "wal2json slot polled every 10 ms"
	for (i = 1; i <= n; i++) {
		m = order[i]
		cf = (m == "wait" || m == "read" || m == "listen")
		r50 = ratio(m, 5, "notify"); r99 = ratio(m, 7, "notify")
		w50 = ratio(m, 5, "notifywal"); w99 = ratio(m, 7, "notifywal")
		met = "-"
		if (cf)
			met = (!failed[m] && w50 > 0 && w50 <= 1.2 && w99 <= 2) ? "yes" : "no"
		printf "RESULT|%scommit → woken, %s (1k tx/s load, %d runs%s)|%s|p50 %s, p90 %s, p99 %s, max %s ms|raw NOTIFY p50 %s, p99 %s ms; NOTIFY with a row p50 %s, p99 %s ms|p50 %.2f×, p99 %.2f× NOTIFY with a row; p50 %.2f×, p99 %.2f× raw NOTIFY (medians of the runs)|%s\n",
			cf ? "3a. " : "", name[m], runs[m], failed[m] ? sprintf(" + %d failed: a sample took > 10 s", failed[m]) : "",
			cf ? "p50 ≤ 1.2×, p99 ≤ 2× the NOTIFY sent with a row (its commit flushed)" : "peer", span(m, 5), span(m, 6), span(m, 7), span(m, 8),
			span("notify", 5), span("notify", 7), span("notifywal", 5), span("notifywal", 7), w50, w99, r50, r99, met
	}
}' "$BENCH_DIR/runs"
