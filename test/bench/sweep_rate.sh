#!/usr/bin/env bash
# Sweeper drain rate vs plain insert rate of the same rows (SPEC §9 row 2),
# and the held-xmin trap (row 8): sweep cost per change with and without a
# transaction holding the xmin horizon while changes are written and swept.
# Usage: bash test/bench/sweep_rate.sh [changes]   (as root or postgres)
. "$(dirname "$0")/lib.sh"
N=${1:-200000}
BENCH_EXTRA_CONF="cfeed.enable_sweeper = off" bench_start
bench_settings
psqlc -c "CREATE EXTENSION cfeed" -c "SELECT cfeed.create_feed('bench', 4)" >/dev/null
psqlc -c "CREATE TABLE plain (feed_id int, shard int, change_id bigint, change_sequence_number bigint, stamped_at timestamptz)"

# Plain insert of N rows in one statement (the baseline).
t0=$(now_ms)
psqlc -c "INSERT INTO plain SELECT 1, g % 4, g FROM generate_series(1, $N) g"
t1=$(now_ms)
# The same rows as changes (pending).
psqlc -c "INSERT INTO cfeed.change (feed_id, shard, change_id) SELECT 1, g % 4, nextval('cfeed.change_id') FROM generate_series(1, $N) g"
t2=$(now_ms)
# Drain: sweep until nothing is pending.
while [ "$(psqlc -c "SELECT coalesce(sum(change_count), 0) FROM cfeed.sweep()")" != 0 ]; do :; done
t3=$(now_ms)
insert_ms=$((t1 - t0)); change_ms=$((t2 - t1)); sweep_ms=$((t3 - t2))
echo "plain insert:   $N rows in ${insert_ms} ms = $((N * 1000 / insert_ms)) rows/s"
echo "change insert:  $N rows in ${change_ms} ms = $((N * 1000 / change_ms)) rows/s"
echo "sweep (drain):  $N rows in ${sweep_ms} ms = $((N * 1000 / sweep_ms)) changes/s"
echo "ratio sweep/plain-insert: $(echo "scale=2; $insert_ms / $sweep_ms" | bc)"

# Held xmin: sweeps of 2000 changes each, normal vs with a transaction
# holding the horizon (and an xid) while 40 batches are written and swept.
batch_cost()
{
	local total=0 i
	for i in $(seq 1 40); do
		psqlc -c "INSERT INTO cfeed.change (feed_id, shard, change_id) SELECT 1, g % 4, nextval('cfeed.change_id') FROM generate_series(1, 2000) g"
		local a b
		a=$(now_ms)
		psqlc -c "SELECT count(*) FROM cfeed.sweep()" >/dev/null
		b=$(now_ms)
		total=$((total + b - a))
	done
	echo "$total"
}
psqlc -c "VACUUM cfeed.change"
normal=$(batch_cost)
as_pg psql -X -q -h "$BENCH_DIR" -p "$BENCH_PORT" -d postgres -c "BEGIN; SELECT pg_current_xact_id(); SELECT pg_sleep(3600)" >/dev/null 2>&1 &
holder=$!
sleep 0.5
held=$(batch_cost)
kill $holder 2>/dev/null || true
psqlc -c "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query LIKE '%pg_sleep(3600)%' AND pid <> pg_backend_pid()" >/dev/null
echo "held xmin: 40 sweeps of 2000 changes: ${normal} ms normal, ${held} ms with the horizon held (ratio $(echo "scale=2; $held / $normal" | bc))"
echo "dead entries left behind while held: $(psqlc -c "SELECT n_dead_tup FROM pg_stat_user_tables WHERE relname = 'change'")"
result "sweeper drain rate, $N pending on 4 shards" "≥ 2× insert rate" "$((N * 1000 / sweep_ms)) changes/s" \
	"bulk INSERT of the same change rows $((N * 1000 / change_ms)) rows/s; plain table $((N * 1000 / insert_ms)) rows/s" \
	"$(calc "$change_ms / $sweep_ms")× change insert; $(calc "$insert_ms / $sweep_ms")× plain" \
	"$([ "$(calc "$change_ms >= 2 * $sweep_ms")" = 1 ] && echo yes || echo "no (vs bulk insert)")"
