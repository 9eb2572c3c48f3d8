#!/usr/bin/env bash
# Sweeper drain rate vs the insert rate of the same rows (row 4a, test/bench/README.md),
# the background sweeper off (sweeps run here, timed, until none is
# pending).  Baseline: N changes on 4 shards inserted in one statement, one
# commit (the fastest way to write them); for scale, the same rows into a
# plain table with a primary key.  ROUNDS rounds, each inserting and then
# draining; the ratio is taken within each round and the median over the
# rounds judged.  The WAL the drain writes per change (its LSN range over
# the changes stamped) is shown beside: the stamp's own WAL, the writers
# stopped.  Then the realistic case: 8 pgbench clients publish one change
# per transaction for SECS seconds (the writers' rate), and those changes
# are drained.  All of it for a feed stored in rows and for one stored in
# ranges (cfeed.default_storage), alternated within each round.
# Usage: bash test/bench/sweep_rate.sh [changes] [rounds] [seconds]
. "$(dirname "$0")/lib.sh"
N=${1:-200000}
ROUNDS=${2:-2}
SECS=${3:-5}
BENCH_EXTRA_CONF="cfeed.enable_sweeper = off" bench_start
bench_settings
psqlc -c "CREATE EXTENSION cfeed" -c "SELECT cfeed.create_feed('bench', 4)" \
	-c "SET cfeed.default_storage = ranges" -c "SELECT cfeed.create_feed('rbench', 4)" \
	-c "CREATE TABLE plain (feed_id int, shard int, change_id bigint PRIMARY KEY, change_sequence_number bigint, stamped_at timestamptz)" >/dev/null
timed()	# timed SQL: milliseconds
{
	local t0
	t0=$(now_ms)
	psqlc -c "$1" >/dev/null
	echo $(( $(now_ms) - t0 ))
}
# drain: stamp every pending change; prints "MILLISECONDS WAL-BYTES"
drain()
{
	local w0 ms
	w0=$(psqlc -c "SELECT pg_current_wal_insert_lsn()")
	ms=$(timed "DO \$\$ BEGIN LOOP EXIT WHEN (SELECT coalesce(sum(change_count), 0) FROM cfeed.sweep()) = 0; COMMIT; END LOOP; END \$\$")
	echo "$ms $(psqlc -c "SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), '$w0')")"
}
rate() { echo $(( $1 * 1000 / $2 )); }
med() { printf '%s\n' "$@" | median; }
# Each round: the plain table, then the change rows of feed 1 (stored in
# rows) and of feed 2 (in ranges), each drained before the next.
declare -a plain_rates
declare -A ratios plain_ratios walper sweep_rates insert_rates
for round in $(seq 1 "$ROUNDS"); do
	p=$(timed "INSERT INTO plain SELECT 1, g % 4, g FROM generate_series(($round - 1) * $N + 1, $round * $N) g")
	plain_rates+=("$(rate "$N" "$p")")
	for feed in 1 2; do
		c=$(timed "INSERT INTO cfeed.change (feed_id, shard, change_id) SELECT $feed, g % 4, nextval('cfeed.change_id') FROM generate_series(1, $N) g")
		read -r s w < <(drain)
		echo "round $round, feed $feed: plain table $p ms, change rows $c ms, sweep $s ms for $N rows ($(rate "$N" "$s") changes/s; $((w / N)) bytes of WAL per change)"
		ratios[$feed]+=" $(calc "$c / $s" 3)" plain_ratios[$feed]+=" $(calc "$p / $s" 3)" walper[$feed]+=" $((w / N))"
		sweep_rates[$feed]+=" $(rate "$N" "$s")" insert_rates[$feed]+=" $(rate "$N" "$c")"
	done
done
for feed in 1 2; do
	label=; [ "$feed" = 2 ] && label=", a feed stored in ranges"
	# shellcheck disable=SC2086 # the lists are words
	ratio=$(med ${ratios[$feed]})
	sql_file w.sql '\set s random(0, 3)' "SELECT cfeed.publish($feed, :s);"
	writers=$(tps 8 "$SECS" w.sql)
	pending=$(pending)
	read -r w_ms w_wal < <(drain)
	[ "$(pending)" = 0 ]
	echo "8 writers, feed $feed: $writers changes/s; their $pending changes (one per transaction) drained in $w_ms ms = $(rate "$pending" "$w_ms") changes/s, $((w_wal / pending)) bytes of WAL per change"
	# shellcheck disable=SC2086
	result "4a. sweeper drain rate, one commit of $N changes on 4 shards, $ROUNDS rounds$label" "≥ 2× insert rate of the same rows" \
		"$(med ${sweep_rates[$feed]}) changes/s (medians of the rounds), $(med ${walper[$feed]}) B of WAL per change" \
		"one INSERT … SELECT of the change rows $(med ${insert_rates[$feed]}) rows/s; the same rows into a plain table with a primary key $(med "${plain_rates[@]}") rows/s; 8 writers publishing $writers changes/s, whose changes drain at $(rate "$pending" "$w_ms")/s ($((w_wal / pending)) B of WAL per change)" \
		"${ratio}× one-statement insert; $(med ${plain_ratios[$feed]})× plain table; $(calc "$pending * 1000 / $w_ms / $writers" 1)× 8 writers" \
		"$(yesno "$ratio >= 2") ($(yesno "$pending * 1000 / $w_ms >= 2 * $writers") vs 8 writers)"
done
