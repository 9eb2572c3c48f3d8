#!/usr/bin/env bash
# Sweeper drain rate vs the insert rate of the same rows (row 4a, test/bench/README.md),
# the background sweeper off (sweeps run here, timed, until none is
# pending).  Baseline: N changes on 4 shards inserted in one statement (the
# fastest way to write them), ROUNDS rounds, best of each; for scale, the
# same rows into a plain table with a primary key.  Then the realistic
# case: 8 pgbench clients publish one change per transaction for SECS
# seconds (the writers' rate), and those changes are drained.
# Usage: bash test/bench/sweep_rate.sh [changes] [rounds] [seconds]
. "$(dirname "$0")/lib.sh"
N=${1:-200000}
ROUNDS=${2:-2}
SECS=${3:-5}
BENCH_EXTRA_CONF="cfeed.enable_sweeper = off" bench_start
bench_settings
psqlc -c "CREATE EXTENSION cfeed" -c "SELECT cfeed.create_feed('bench', 4)" \
	-c "CREATE TABLE plain (feed_id int, shard int, change_id bigint PRIMARY KEY, change_sequence_number bigint, stamped_at timestamptz)" >/dev/null
timed()	# timed SQL: milliseconds
{
	local t0
	t0=$(now_ms)
	psqlc -c "$1" >/dev/null
	echo $(( $(now_ms) - t0 ))
}
drain() { timed "DO \$\$ BEGIN LOOP EXIT WHEN (SELECT coalesce(sum(change_count), 0) FROM cfeed.sweep()) = 0; COMMIT; END LOOP; END \$\$"; }
plain_ms=0; change_ms=0; sweep_ms=0
for round in $(seq 1 "$ROUNDS"); do
	p=$(timed "INSERT INTO plain SELECT 1, g % 4, g FROM generate_series(($round - 1) * $N + 1, $round * $N) g")
	c=$(timed "INSERT INTO cfeed.change (feed_id, shard, change_id) SELECT 1, g % 4, nextval('cfeed.change_id') FROM generate_series(1, $N) g")
	s=$(drain)
	echo "round $round: plain table $p ms, change rows $c ms, sweep $s ms for $N rows"
	[ "$plain_ms" != 0 ] && [ "$plain_ms" -le "$p" ] || plain_ms=$p
	[ "$change_ms" != 0 ] && [ "$change_ms" -le "$c" ] || change_ms=$c
	[ "$sweep_ms" != 0 ] && [ "$sweep_ms" -le "$s" ] || sweep_ms=$s
done
rate() { echo $(( $1 * 1000 / $2 )); }
echo "best: plain table $(rate "$N" "$plain_ms") rows/s; change rows $(rate "$N" "$change_ms") rows/s; sweep $(rate "$N" "$sweep_ms") changes/s"
sql_file w.sql '\set s random(0, 3)' 'SELECT cfeed.publish(1, :s);'
writers=$(tps 8 "$SECS" w.sql)
pending=$(psqlc -c "SELECT count(*) FROM cfeed.change WHERE change_sequence_number IS NULL")
w_ms=$(drain)
[ "$(psqlc -c "SELECT count(*) FROM cfeed.change WHERE change_sequence_number IS NULL")" = 0 ]
echo "8 writers: $writers changes/s; their $pending changes (one per transaction) drained in $w_ms ms = $(rate "$pending" "$w_ms") changes/s"
result "4a. sweeper drain rate, $N pending on 4 shards" "≥ 2× insert rate of the same rows" "$(rate "$N" "$sweep_ms") changes/s" \
	"one INSERT … SELECT of the change rows $(rate "$N" "$change_ms") rows/s; same rows into a plain table with a primary key $(rate "$N" "$plain_ms") rows/s; 8 writers publishing $writers changes/s, whose changes drain at $(rate "$pending" "$w_ms")/s" \
	"$(calc "$change_ms / $sweep_ms")× one-statement insert; $(calc "$plain_ms / $sweep_ms")× plain table; $(calc "$pending * 1000 / $w_ms / $writers" 1)× 8 writers" \
	"$(yesno "$change_ms >= 2 * $sweep_ms") ($(yesno "$pending * 1000 / $w_ms >= 2 * $writers") vs 8 writers)"
