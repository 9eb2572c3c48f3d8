#!/usr/bin/env bash
# Sweeper drain rate vs the insert rate of the same rows (SPEC §9 row 2):
# N changes on 4 shards inserted in one statement (the baseline: the fastest
# way to write them), then stamped by cfeed.sweep() until none is pending;
# for scale, the same rows into a plain table with a primary key.  ROUNDS
# rounds, best of each.  The background sweeper is off (sweeps run here).
# Usage: bash test/bench/sweep_rate.sh [changes] [rounds]
. "$(dirname "$0")/lib.sh"
N=${1:-200000}
ROUNDS=${2:-2}
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
plain_ms=0; change_ms=0; sweep_ms=0
for round in $(seq 1 "$ROUNDS"); do
	p=$(timed "INSERT INTO plain SELECT 1, g % 4, g FROM generate_series(($round - 1) * $N + 1, $round * $N) g")
	c=$(timed "INSERT INTO cfeed.change (feed_id, shard, change_id) SELECT 1, g % 4, nextval('cfeed.change_id') FROM generate_series(1, $N) g")
	s=$(timed "DO \$\$ BEGIN LOOP EXIT WHEN (SELECT coalesce(sum(change_count), 0) FROM cfeed.sweep()) = 0; COMMIT; END LOOP; END \$\$")
	echo "round $round: plain table $p ms, change rows $c ms, sweep $s ms for $N rows"
	[ "$plain_ms" != 0 ] && [ "$plain_ms" -le "$p" ] || plain_ms=$p
	[ "$change_ms" != 0 ] && [ "$change_ms" -le "$c" ] || change_ms=$c
	[ "$sweep_ms" != 0 ] && [ "$sweep_ms" -le "$s" ] || sweep_ms=$s
done
[ "$(psqlc -c "SELECT count(*) FROM cfeed.change WHERE change_sequence_number IS NULL")" = 0 ]
rate() { echo $(( N * 1000 / $1 )); }
echo "best: plain table $(rate "$plain_ms") rows/s; change rows $(rate "$change_ms") rows/s; sweep $(rate "$sweep_ms") changes/s"
result "sweeper drain rate, $N pending on 4 shards" "≥ 2× insert rate of the same rows" "$(rate "$sweep_ms") changes/s" \
	"one INSERT … SELECT of the change rows $(rate "$change_ms") rows/s; of the same rows into a plain table with a primary key $(rate "$plain_ms") rows/s" \
	"$(calc "$change_ms / $sweep_ms")× change rows; $(calc "$plain_ms / $sweep_ms")× plain table" \
	"$(yesno "$change_ms >= 2 * $sweep_ms")"
