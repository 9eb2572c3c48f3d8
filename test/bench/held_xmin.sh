#!/usr/bin/env bash
# The held-xmin trap (SPEC §9 row 8) with live writers: pgbench writes
# changes (8 clients) while the background sweeper stamps them, first
# normally, then while another session holds an xid (and so the xmin
# horizon) for the whole window, then normally again.  Reports writer TPS,
# changes stamped per second and the sweeper's CPU per change in each
# window, and the table size before and after VACUUM.
# Usage: bash test/bench/held_xmin.sh [seconds per window]
. "$(dirname "$0")/lib.sh"
SECS=${1:-20}
bench_start
bench_settings
psqlc -c "CREATE EXTENSION cfeed" -c "SELECT cfeed.create_feed('bench', 4)" >/dev/null
printf '%s\n' '\set s random(0, 3)' "INSERT INTO cfeed.change (feed_id, shard, change_id) VALUES (1, :s, nextval('cfeed.change_id'));" > "$BENCH_DIR/w.sql"
chmod 644 "$BENCH_DIR/w.sql"
sleep 1.5
pid=$(psqlc -c "SELECT pid FROM pg_stat_activity WHERE backend_type = 'cfeed sweeper'")
window()
{
	local label=$1 c0 c1 s0 s1 tps
	c0=$(awk '{print $14 + $15}' "/proc/$pid/stat")
	s0=$(psqlc -c "SELECT changes_stamped FROM cfeed.sweepers")
	tps=$(pgbenchc -n -c 8 -j 2 -T "$SECS" -f "$BENCH_DIR/w.sql" 2>/dev/null | sed -n 's/^tps = \([0-9.]*\).*/\1/p')
	c1=$(awk '{print $14 + $15}' "/proc/$pid/stat")
	s1=$(psqlc -c "SELECT changes_stamped FROM cfeed.sweepers")
	echo "$label: writers $tps tps; stamped $(( (s1 - s0) / SECS ))/s; sweeper CPU $(echo "scale=2; ($c1 - $c0) * 10000 / ($s1 - $s0 + 1)" | bc) us/change" >&2
	echo "$(echo "scale=2; ($c1 - $c0) * 10000 / ($s1 - $s0 + 1)" | bc)"
}
normal=$(window "normal      ")
as_pg psql -X -q -h "$BENCH_DIR" -p "$BENCH_PORT" -d postgres -c "BEGIN; SELECT pg_current_xact_id(); SELECT pg_sleep(3600)" >/dev/null 2>&1 &
sleep 0.5
held=$(window "xmin held   ")
psqlc -c "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query LIKE '%pg_sleep(3600)%' AND pid <> pg_backend_pid()" >/dev/null
wait 2>/dev/null || true
after=$(window "after       ")
before=$(psqlc -c "SELECT pg_size_pretty(pg_total_relation_size('cfeed.change'))")
echo "cfeed.change before VACUUM: $(psqlc -c "SELECT pg_size_pretty(pg_total_relation_size('cfeed.change'))")"
psqlc -c "VACUUM cfeed.change"
echo "cfeed.change after VACUUM:  $(psqlc -c "SELECT pg_size_pretty(pg_total_relation_size('cfeed.change'))"), dead tuples $(psqlc -c "SELECT n_dead_tup FROM pg_stat_user_tables WHERE relname = 'change'")"
result "xmin horizon held ${SECS}s under writes" "sweep cost/change ≤ 2× normal; size recovers" \
	"$held us/change held, $after after" "$normal us/change normal" "$(calc "$held / $normal")" \
	"$([ "$(calc "$held <= 2 * $normal")" = 1 ] && echo yes || echo no)"
