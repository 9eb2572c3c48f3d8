#!/usr/bin/env bash
# Idle cost (row 4b, test/bench/README.md): CPU of the cfeed launcher and sweeper, and the
# WAL written, over SECS idle seconds with a 4-shard feed, one change and
# the sweeper running; the WAL records of the window are listed by
# pg_waldump (anything not from cfeed is the server's own, e.g. the running
# transactions snapshot the checkpointer logs every 15 s).
# Usage: bash test/bench/idle.sh [seconds]
. "$(dirname "$0")/lib.sh"
SECS=${1:-20}
bench_start
bench_settings
psqlc -c "CREATE EXTENSION cfeed" -c "SELECT cfeed.create_feed('idle', 4)" -c "SELECT cfeed.publish(1, 0)" >/dev/null
sleep 2
pids=$(psqlc -c "SELECT string_agg(pid::text, ' ') FROM pg_stat_activity WHERE backend_type LIKE 'cfeed%'")
[ "$(echo "$pids" | wc -w)" = 2 ]
cpu() { local t=0 p; for p in $pids; do t=$((t + $(cpu_us "$p"))); done; echo "$t"; }
c0=$(cpu); w0=$(psqlc -c "SELECT pg_current_wal_insert_lsn()")
sleep "$SECS"
c1=$(cpu); w1=$(psqlc -c "SELECT pg_current_wal_insert_lsn()")
wal=$(psqlc -c "SELECT pg_wal_lsn_diff('$w1', '$w0')")
records=none
if [ "$wal" != 0 ]; then
	records=$(as_pg pg_waldump -p "$BENCH_DIR/data/pg_wal" -s "$w0" -e "$w1" 2>/dev/null |
		sed -n 's/^rmgr: \([A-Za-z0-9]*\) .*desc: \([A-Z_0-9]*\).*/\1 \2/p' | sort | uniq -c | awk '{printf "%s%s/%s ×%s", (NR > 1 ? ", " : ""), $2, $3, $1}')
fi
pct=$(calc "($c1 - $c0) / ($SECS * 10000)" 3)
echo "idle ${SECS}s: launcher + sweeper CPU $(( (c1 - c0) / 1000 )) ms = $pct% of a core; WAL $wal bytes (records: $records)"
# cfeed writes no WAL when idle: every record must be the server's own
cfeed_wal=$(echo "$records" | tr ',' '\n' | grep -cvE 'none|Standby/RUNNING_XACTS|XLOG/CHECKPOINT_ONLINE' || true)
result "4b. idle sweeper, ${SECS}s" "≤ 0.1% of a core, no WAL" "$pct% of a core; $wal bytes WAL (records: $records)" \
	"-" "-" "$(yesno "$pct <= 0.1 && $cfeed_wal == 0")"
