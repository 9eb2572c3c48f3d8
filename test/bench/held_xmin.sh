#!/usr/bin/env bash
# The held-xmin trap (target 8, test/bench/README.md) with live writers: 8 pgbench clients
# publish changes while the background sweeper stamps them, for WINDOW
# seconds normally, then HELD seconds while another session holds an xid
# (and so the xmin horizon: no stamped-over entry can be pruned), then WINDOW
# seconds after it ended.  Per window: writer TPS, changes stamped per second
# and the sweeper's CPU per change; cfeed.change's size and dead tuples
# (pgstattuple) at the end of the hold and after a VACUUM at the end.
# Usage: bash test/bench/held_xmin.sh [held seconds] [window seconds]
. "$(dirname "$0")/lib.sh"
HELD=${1:-60}
WINDOW=${2:-15}
bench_start
bench_settings
psqlc -c "CREATE EXTENSION cfeed" -c "CREATE EXTENSION pgstattuple" -c "SELECT cfeed.create_feed('bench', 4)" >/dev/null
sql_file w.sql '\set s random(0, 3)' 'SELECT cfeed.publish(1, :s);'
sleep 1.5
pid=$(psqlc -c "SELECT pid FROM cfeed.sweepers")
# window LABEL SECS: prints the sweeper's µs of CPU per change stamped
window()
{
	local c0 s0 t c1 s1 cost
	c0=$(cpu_us "$pid"); s0=$(psqlc -c "SELECT changes_stamped FROM cfeed.sweepers")
	t=$(tps 8 "$2" w.sql)
	c1=$(cpu_us "$pid"); s1=$(psqlc -c "SELECT changes_stamped FROM cfeed.sweepers")
	cost=$(calc "($c1 - $c0) / ($s1 - $s0)" 1)
	echo "$1 ($2 s): writers $t tps; stamped $(( (s1 - s0) / $2 ))/s; sweeper $cost µs CPU/change" >&2
	echo "$cost"
}
table() { psqlc -c "SELECT pg_size_pretty(table_len) || ', ' || dead_tuple_count || ' dead tuples, ' || free_percent || '% free' FROM pgstattuple('cfeed.change')"; }
normal=$(window "normal   " "$WINDOW")
bg_sql holder "BEGIN; SELECT pg_current_xact_id(); SELECT pg_sleep(3600)"
sleep 0.5
held=$(window "xmin held" "$HELD")
at_hold_end=$(table)
stop_bg holder
after=$(window "after    " "$WINDOW")
sleep 1
psqlc -c "VACUUM cfeed.change"
after_vacuum=$(table)
echo "cfeed.change at the end of the hold: $at_hold_end; at the end, after VACUUM: $after_vacuum"
result "xmin horizon held ${HELD}s under writes (8 clients)" "sweep cost per change ≤ 2× normal; table size recovers after" \
	"sweeper $held µs CPU/change held, $after after; table at the end of the hold: $at_hold_end; after VACUUM: $after_vacuum" \
	"$normal µs/change before" "$(calc "$held / $normal")× held, $(calc "$after / $normal")× after" \
	"$(echo "$after_vacuum" | grep -q ', 0 dead tuples' && yesno "$held <= 2 * $normal && $after <= 2 * $normal" || echo no)"
