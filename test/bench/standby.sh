#!/usr/bin/env bash
# Commit -> woken on a hot standby (row 3c, test/bench/README.md): a
# streaming standby of the cluster; the probe writer publishes on the
# primary, one change per sample, while LOAD_RATE publishes/s (default
# 300, as in test/t/201_standby_wait.pl) go to another feed; on the
# standby a cfeed.wait and a cfeed.read(wait_ms) reader wait for each
# change (latency.c, READER_CONNINFO; LISTEN does not work on a standby),
# and, as the floor, a reader polls cfeed.head on the standby every 0.2 ms
# until the change's number shows there (its stamp replayed and visible:
# "replayed").  RUNS runs of SAMPLES samples, the waiters and the poller
# in turn in each run (the poller alone: its polling would load the
# waiters' runs).  Judged: per run, a waiter's p50 less the poller's p50
# (how long after its stamp is replayed a waiter wakes), the median over
# the runs, ≤ 2 ms; the figures from the primary's commit beside.
# Usage: bash test/bench/standby.sh [samples]   (RUNS, LOAD_RATE: env)
. "$(dirname "$0")/lib.sh"
SAMPLES=${1:-500}
RUNS=${RUNS:-3}
LOAD_RATE=${LOAD_RATE:-300}
cc_tool latency
bench_start
bench_settings
psqlc -c "CREATE EXTENSION cfeed" -c "SELECT cfeed.create_feed('probe', 1)" \
	-c "SELECT cfeed.create_feed('load', 4)" >/dev/null
standby=$(bench_standby standby $((BENCH_PORT + 2)))
# the feeds replayed on the standby
until [ "$(as_pg psql -X -At "$standby" -c "SELECT count(*) FROM cfeed.feed" 2>/dev/null)" = 2 ]; do sleep 0.2; done
sql_file load.sql '\set s random(0, 3)' 'SELECT cfeed.publish(2, :s);'
pgbenchc -n -c 4 -j 2 -R "$LOAD_RATE" -T 3600 -f "$BENCH_DIR/load.sql" >/dev/null 2>&1 &
sleep 1
for run in $(seq 1 "$RUNS"); do
	for mode in wait,read replayed; do
		as_pg env READER_CONNINFO="$standby" "$BENCH_DIR/latency" "$CONNINFO" "$mode" "$SAMPLES" 1 2>&1 |
			sed "s/^/run $run: /" || echo "run $run: $mode FAILED"
	done
done | tee "$BENCH_DIR/runs"
echo "replay lag at the end: $(as_pg psql -X -At "$standby" -c "SELECT now() - pg_last_xact_replay_timestamp()")"
# The rows, from the runs' lines ("run R: MODE n=... p50=... p90=... p99=... max=...").
awk -v target=2 -v rate="$LOAD_RATE" '
/^run [0-9]+: [a-z]+ FAILED$/ { failed = 1 }
/^run [0-9]+: [a-z]+ +n=/ {
	r = $2 + 0; m = $3; runs[r] = 1
	for (f = 5; f <= 8; f++) { split($f, kv, "="); v[m, r, f] = kv[2] + 0 }
	split($10, kv, "="); cancelled[m] += kv[2]
}
function sort(a, n,  i, j, t) { for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t } }
function span(m, f,  r, lo, hi) {
	lo = ""; for (r in runs) { if (lo == "" || v[m, r, f] < lo) lo = v[m, r, f]; if (v[m, r, f] > hi) hi = v[m, r, f] }
	return sprintf("%.2f–%.2f", lo, hi)
}
END {
	name["wait"] = "cfeed.wait"; name["read"] = "cfeed.read(wait_ms)"
	for (k = 1; k <= 2; k++) {
		m = (k == 1) ? "wait" : "read"; n = 0
		for (r in runs) a[++n] = v[m, r, 5] - v["replayed", r, 5]
		sort(a, n)
		d = n ? a[int((n + 1) / 2)] : 0
		printf "RESULT|3c. commit → woken on a hot standby, %s (%d tx/s load, %d runs%s)|p50 ≤ %d ms after the stamp is replayed|from the primary'\''s commit: p50 %s, p99 %s, max %s ms; %d statements cancelled by recovery conflicts (started again)|the stamp visible on the standby (cfeed.head polled every 0.2 ms): p50 %s, p99 %s ms (%d polls cancelled)|p50 %.2f ms after (median of the runs)|%s\n",
			name[m], rate, n, failed ? ", some failed" : "", target, span(m, 5), span(m, 7), span(m, 8), cancelled[m],
			span("replayed", 5), span("replayed", 7), cancelled["replayed"], d, (!failed && n && d <= target) ? "yes" : "no"
	}
}' "$BENCH_DIR/runs"
