#!/usr/bin/env bash
# The held-xmin trap (rows 3b and 6, test/bench/README.md) with live writers: 8 pgbench
# clients publish changes at full speed while the background sweeper stamps
# them, for WINDOW seconds normally, then HELD seconds while another session
# holds the xmin horizon (a REPEATABLE READ transaction with an xid: no
# stamped-over version can be pruned, and its xid stays in every sweep's
# snapshot), then WINDOW seconds after it ended; HOLDS times held and free
# in turn.  Per window: writer TPS,
# changes stamped per second, the sweeper's CPU per change and the growth
# of cfeed's heaps per change (row 6b: held, against the writer's own row,
# and the writers' TPS held against free, medians of the windows); cfeed.change's
# size and dead tuples (pgstattuple) at the end of the hold and after a
# VACUUM at the end.  Throughout, a probe writer publishes 50 changes/s to a
# feed of its own, each waking three consumers at once (cfeed.wait,
# cfeed.read(wait_ms), LISTEN: latency.c), and, as the control, a raw NOTIFY
# round trip is timed 50 times/s: the consumers' commit -> woken p50 and
# p99 in the held windows are compared with the free windows around them
# (what the machine's other load does shows in the control).  Row 6 takes
# the sweeper's cost in the first free window, the last held one and the
# last free one.
# STORAGE (env): the storage of the writers' feed, rows (the default, as in
# make bench) or ranges; the rows' labels then say so.
# Usage: bash test/bench/held_xmin.sh [held seconds] [window seconds] [holds]
. "$(dirname "$0")/lib.sh"
HELD=${1:-60}
WINDOW=${2:-15}
HOLDS=${3:-2}
STORAGE=${STORAGE:-rows}
label=
[ "$STORAGE" = rows ] || label=", a feed stored in $STORAGE"
cc_tool latency
bench_start
bench_settings
psqlc -c "CREATE EXTENSION cfeed" -c "CREATE EXTENSION pgstattuple" -c "SET cfeed.default_storage = $STORAGE" \
	-c "SELECT cfeed.create_feed('bench', 4)" -c "RESET cfeed.default_storage" -c "SELECT cfeed.create_feed('probe', 1)" >/dev/null
sql_file w.sql '\set s random(0, 3)' 'SELECT cfeed.publish(1, :s);'
sleep 1.5
pid=$(psqlc -c "SELECT pid FROM cfeed.sweepers")
series=$BENCH_DIR/series
: > "$series.windows"
chmod 666 "$series.windows"
probes=$(( (HOLDS * (HELD + WINDOW) + WINDOW) * 100 ))	# more than the windows need: killed at the end
for m in wait,read,listen notify; do
	as_pg env PACE_MS=20 SERIES_FILE="$series" "$BENCH_DIR/latency" "$CONNINFO application_name=bench_bg_probe" "$m" "$probes" 2 >/dev/null 2>&1 &
done
sleep 1
# heap: the bytes of the heaps of cfeed's tables (whatever the storage)
heap() { psqlc -c "SELECT sum(pg_relation_size(c.oid)) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'cfeed' AND c.relkind = 'r'"; }
# window LABEL SECS: prints "COST TPS GROWTH": the sweeper's µs of CPU per
# change stamped, the writers' TPS and the growth of cfeed's heaps per
# change stamped (bytes); notes the window's bounds (ms since the epoch)
# for the probes' samples
window()
{
	local c0 s0 h0 t c1 s1 h1 cost t0 growth
	psqlc -c "CHECKPOINT"
	c0=$(cpu_us "$pid"); s0=$(psqlc -c "SELECT changes_stamped FROM cfeed.sweepers"); h0=$(heap)
	t0=$(now_ms)
	t=$(pgbenchc -n -c 8 -j 2 -T "$2" -f "$BENCH_DIR/w.sql" 2>/dev/null | sed -n 's/^tps = \([0-9]*\).*/\1/p')
	echo "$1 $t0 $(now_ms)" >> "$series.windows"
	c1=$(cpu_us "$pid"); s1=$(psqlc -c "SELECT changes_stamped FROM cfeed.sweepers"); h1=$(heap)
	cost=$(calc "($c1 - $c0) / ($s1 - $s0)" 1)
	growth=$(( (h1 - h0) / (s1 - s0) ))
	echo "$1 ($2 s): writers $t tps; stamped $(( (s1 - s0) / $2 ))/s; sweeper $cost µs CPU/change; cfeed's heaps +$growth B/change" >&2
	echo "$cost $t $growth"
}
table() { psqlc -c "SELECT pg_size_pretty(table_len) || ', ' || dead_tuple_count || ' dead tuples, ' || free_percent || '% free' FROM pgstattuple('cfeed.change')"; }
read -r normal tps_free growth_free < <(window free "$WINDOW")
tps_held= growth_held= tps_frees=$tps_free growth_frees=$growth_free
for _ in $(seq "$HOLDS"); do
	bg_sql holder "BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT pg_current_xact_id(); SELECT pg_sleep(3600)"
	sleep 0.5
	read -r held t g < <(window held "$HELD")
	tps_held="$tps_held $t" growth_held="$growth_held $g"
	at_hold_end=$(table)
	stop_bg holder
	read -r after t g < <(window free "$WINDOW")
	tps_frees="$tps_frees $t" growth_frees="$growth_frees $g"
done
# the writer's own row: a change row's tuple, aligned, and its line pointer
row=$(psqlc -c "SELECT round(avg((pg_column_size(c.*) + 7) / 8 * 8 + 4)) FROM (SELECT * FROM cfeed.change LIMIT 10000) c")
stop_bg probe
sleep 1
psqlc -c "VACUUM cfeed.change"
after_vacuum=$(table)
echo "cfeed.change at the end of the hold: $at_hold_end; at the end, after VACUUM: $after_vacuum"
result "6. xmin horizon held ${HELD}s under writes (8 clients)$label" "sweep cost per change ≤ 2× normal; table size recovers after" \
	"sweeper $held µs CPU/change held, $after after; table at the end of the hold: $at_hold_end; after VACUUM: $after_vacuum" \
	"$normal µs/change before" "$(calc "$held / $normal")× held, $(calc "$after / $normal")× after" \
	"$(echo "$after_vacuum" | grep -q ', 0 dead tuples' && yesno "$held <= 2 * $normal && $after <= 2 * $normal" || echo no)"
mids() { echo "$1" | xargs -n1 | median; }
tps_ratio=$(calc "$(mids "$tps_held") / $(mids "$tps_frees")")
growth=$(mids "$growth_held")
result "6b. xmin horizon held ${HELD}s under writes (8 clients): heap growth and writer TPS$label" \
	"heap growth per change = the writer's own row (≤ 1.1×); writer TPS ≥ 1/1.1 without the hold" \
	"held: cfeed's heaps +$growth B per change (windows:$growth_held), writers $(mids "$tps_held") tps (windows:$tps_held)" \
	"the writer's own row $row B (tuple and line pointer); without the hold: +$(mids "$growth_frees") B per change (windows:$growth_frees), writers $(mids "$tps_frees") tps (windows:$tps_frees)" \
	"growth $(calc "$growth / $row")× the row; TPS ${tps_ratio}× without" "$(yesno "$growth <= 1.1 * $row && $tps_ratio >= 0.909")"
# The probes' samples per mode: p50 and p99 in the held windows and in the
# free ones; held over free judged, ≤ 1.1×.
# pct MODE held|free P: the P-quantile of MODE's samples in those windows
pct()
{
	awk -v m="$1" -v w="$2" '
FNR == NR { n++; label[n] = $1; lo[n] = $2; hi[n] = $3; next }
$1 == m { for (i = 1; i <= n; i++) if (label[i] == w && $2 >= lo[i] && $2 < hi[i]) print $3 }' \
		"$series.windows" "$series" | sort -g | awk -v p="$3" '{ v[NR] = $1 } END { printf "%.2f\n", NR ? v[int((NR - 1) * p) + 1] : 0 }'
}
declare -A q
for m in wait read listen notify; do
	for w in held free; do
		q[$m,$w,50]=$(pct "$m" "$w" 0.5) q[$m,$w,99]=$(pct "$m" "$w" 0.99)
	done
	echo "$m: held p50 ${q[$m,held,50]} p99 ${q[$m,held,99]} ms; without p50 ${q[$m,free,50]} p99 ${q[$m,free,99]} ms"
done
control="control, raw NOTIFY: held p50 ${q[notify,held,50]}, p99 ${q[notify,held,99]}, without p50 ${q[notify,free,50]}, p99 ${q[notify,free,99]} ms ($(calc "${q[notify,held,50]} / ${q[notify,free,50]}")×, $(calc "${q[notify,held,99]} / ${q[notify,free,99]}")×)"
for m in wait read listen; do
	case $m in
	wait) how=cfeed.wait;; read) how="cfeed.read(wait_ms)";; listen) how="LISTEN on the shard channel";;
	esac
	r50=$(calc "${q[$m,held,50]} / ${q[$m,free,50]}") r99=$(calc "${q[$m,held,99]} / ${q[$m,free,99]}")
	result "3b. commit → woken under a held xmin horizon ($HOLDS × ${HELD} s, 8 full-speed writers$label), $how" "p50 and p99 ≤ 1.1× without the hold" \
		"held: p50 ${q[$m,held,50]}, p99 ${q[$m,held,99]} ms" \
		"without ($((HOLDS + 1)) × ${WINDOW} s around the holds): p50 ${q[$m,free,50]}, p99 ${q[$m,free,99]} ms; $control" \
		"p50 $r50×, p99 $r99×" "$(yesno "$r50 <= 1.1 && $r99 <= 1.1")"
done
