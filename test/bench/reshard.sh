#!/usr/bin/env bash
# Writers across a split (row 9, test/bench/README.md): CLIENTS pgbench
# clients publish by key (cfeed.shard_for) to a 2-shard feed for SECS
# seconds, with the sweeper on; at a third and at two thirds of the run the
# feed is split (cfeed.reshard, 2 -> 4 -> 8 shards).  From pgbench's
# per-transaction log: the latency (p50, p99, max) of the transactions that
# overlap a split or the second after it, against the others of the same
# run.  Target: no writer error, p99 across the splits within 2x of the
# others'.  Also: how long each reshard() call took.
# Usage: bash test/bench/reshard.sh [seconds] [clients]
. "$(dirname "$0")/lib.sh"
SECS=${1:-30}
CLIENTS=${2:-8}
bench_start
bench_settings
psqlc -c "CREATE EXTENSION cfeed" -c "SELECT cfeed.create_feed('f', 2)" >/dev/null
sql_file w.sql '\set k random(1, 100000)' "SELECT cfeed.publish(1, cfeed.shard_for(1, 'k' || :k));"
psqlc -c "CHECKPOINT"
pgbenchc -n -c "$CLIENTS" -j 2 -T "$SECS" -l --log-prefix="$BENCH_DIR/tx" -f "$BENCH_DIR/w.sql" \
	> "$BENCH_DIR/pgbench.out" 2>&1 &
load_pid=$!
splits=
for shards in 4 8; do
	sleep "$(calc "$SECS / 3" 1)"
	t0=$(now_ms)
	psqlc -c "SELECT count(*) FROM cfeed.reshard(1, $shards)" >/dev/null
	t1=$(now_ms)
	splits="$splits $t0:$t1"
	echo "split to $shards new shards: reshard() took $((t1 - t0)) ms"
done
wait "$load_pid" || { cat "$BENCH_DIR/pgbench.out"; exit 1; }
errors=$(grep -c -i 'error\|aborted' "$BENCH_DIR/pgbench.out" || true)
# pgbench -l: client tx latency_us script epoch_s epoch_us.  Near a split:
# the transaction ran during [start, end + 1 s] of one.
cat "$BENCH_DIR"/tx* | awk -v splits="$splits" '
	BEGIN { n = split(splits, s, " "); for (i = 1; i <= n; i++) { split(s[i], p, ":"); lo[i] = p[1]; hi[i] = p[2] + 1000 } }
	{
		end = $5 * 1000 + $6 / 1000; start = end - $3 / 1000; near = 0
		for (i = 1; i <= n; i++) if (start < hi[i] && end > lo[i]) near = 1
		print (near ? "near" : "far"), $3 / 1000
	}' > "$BENCH_DIR/lat"
stats()
{
	awk -v w="$1" '$1 == w { print $2 }' "$BENCH_DIR/lat" | sort -g |
		awk '{ v[NR] = $1 } END { if (NR == 0) { print "0 0 0 0"; exit }
			p = int(NR * 0.99); if (p < 1) p = 1
			printf "%d %.2f %.2f %.2f\n", NR, v[int((NR + 1) / 2)], v[p], v[NR] }'
}
read -r n_near p50_near p99_near max_near <<< "$(stats near)"
read -r n_far p50_far p99_far max_far <<< "$(stats far)"
echo "near the splits: $n_near tx, p50 $p50_near ms, p99 $p99_near ms, max $max_near ms"
echo "elsewhere: $n_far tx, p50 $p50_far ms, p99 $p99_far ms, max $max_far ms; writer errors: $errors"
ratio=$(calc "$p99_near / $p99_far")
result "9. writer latency across a split (2 -> 4 -> 8 shards, $CLIENTS writers)" "no error; p99 <= 2x the same run's other transactions" \
	"p50 $p50_near / p99 $p99_near / max $max_near ms ($n_near tx); errors $errors; reshard()$(for s in $splits; do echo -n " $(( ${s#*:} - ${s%:*} )) ms"; done)" \
	"p50 $p50_far / p99 $p99_far / max $max_far ms ($n_far tx)" "${ratio}x" \
	"$([ "$errors" = 0 ] && yesno "$ratio <= 2" || echo no)"
