#!/usr/bin/env bash
# End to end (row 4d, test/bench/README.md): TOTAL changes written by 16 pgbench clients to
# an 8-shard feed, read by a consumer group of 4 (consumer loops in 4
# background psql sessions).  Each page is recorded in a `delivered` table in
# its checkpoint's transaction: its shard, first and last number, row count,
# and whether its numbers run on from the cursor without a gap or repeat.
# Checks that every shard's pages tile its numbers from the start (every
# change delivered exactly once, in shard order) and that the pages add up
# to TOTAL; compares the time from the first write to the last delivery
# with writing alone (another feed, same clients).
# Usage: bash test/bench/e2e.sh [total]
. "$(dirname "$0")/lib.sh"
TOTAL=${1:-100000}
START=2000000000000000	# a new shard's start value: its first change is START + 1
bench_start
bench_settings
psqlc -c "CREATE EXTENSION cfeed" -c "SELECT cfeed.create_feed('alone', 8)" -c "SELECT cfeed.create_feed('e2e', 8)" \
	-c "CREATE TABLE delivered (id bigserial PRIMARY KEY, owner text, shard int, first bigint, last bigint, n int, contiguous bool)" >/dev/null
for f in 1 2; do sql_file "w$f.sql" '\set s random(0, 7)' "SELECT cfeed.publish($f, :s);"; done
publish_all() { pgbenchc -n -c 16 -j 2 -t $((TOTAL / 16)) -f "$BENCH_DIR/w$1.sql" >/dev/null 2>&1; }
psqlc -c "CHECKPOINT"
t0=$(now_ms); publish_all 1; t1=$(now_ms)
alone=$((t1 - t0))
# consumer NAME: the consumer loop of docs/consumer-groups.md: acquire in
# its own transaction every second (ttl 3 s), then one page per lease, each page
# and its checkpoint in one transaction; a fenced checkpoint (55000) undoes
# the page and triggers a new acquire.  After a round that brought fewer
# than 200 changes it waits 20 ms (fewer, fuller pages: a checkpoint per
# handful of changes costs the writers a commit each on 2 cores).  Exits
# when the group's cursors add up to TOTAL.
consumer()
{
	bg_sql "$1" "DO \$\$
DECLARE
	sh int[]; cur bigint[]; ep bigint[];
	next_acquire timestamptz := '-infinity';
	i int; n int; last bigint; got int;
BEGIN
	LOOP
		IF clock_timestamp() >= next_acquire THEN
			SELECT coalesce(array_agg(a.shard ORDER BY a.shard), '{}'), coalesce(array_agg(a.cursor ORDER BY a.shard), '{}'),
				   coalesce(array_agg(a.epoch ORDER BY a.shard), '{}')
			INTO sh, cur, ep FROM cfeed.acquire('g', 2, '$1', 3000) a;
			COMMIT;
			next_acquire := clock_timestamp() + interval '1 s';
		END IF;
		got := 0;
		FOR i IN 1 .. coalesce(array_length(sh, 1), 0) LOOP
			BEGIN
				WITH r AS (SELECT change_sequence_number AS csn, row_number() OVER () AS k
				           FROM cfeed.read(2, sh[i], cur[i], 1000))
				INSERT INTO delivered (owner, shard, first, last, n, contiguous)
				SELECT '$1', sh[i], min(csn), max(csn), count(*), bool_and(csn = cur[i] + k) FROM r
				HAVING count(*) > 0
				RETURNING delivered.n, delivered.last INTO n, last;
				IF n > 0 THEN
					PERFORM cfeed.checkpoint('g', 2, sh[i], '$1', ep[i], last);
					cur[i] := last;
					got := got + n;
				END IF;
			EXCEPTION WHEN object_not_in_prerequisite_state THEN
				next_acquire := '-infinity';
			END;
			COMMIT;
		END LOOP;
		IF got = 0 THEN
			EXIT WHEN (SELECT sum(cursor - $START) FROM cfeed.lease WHERE group_name = 'g') >= $TOTAL;
		END IF;
		IF got < 200 THEN
			PERFORM pg_sleep(0.02);
		END IF;
	END LOOP;
END \$\$"
}
psqlc -c "CHECKPOINT"
for c in c1 c2 c3 c4; do consumer $c; done
t0=$(now_ms); publish_all 2; tw=$(now_ms)
while [ "$(psqlc -c "SELECT count(*) FROM pg_stat_activity WHERE application_name LIKE 'bench_bg_c_'")" != 0 ]; do sleep 0.05; done
t1=$(now_ms)
both=$((t1 - t0))
check=$(psqlc -c "SELECT sum(n) || ' delivered in ' || count(*) || ' pages; exactly once, in order: ' ||
	bool_and(contiguous AND n = last - first + 1 AND first = coalesce(prev, $START) + 1)
	FROM (SELECT *, lag(last) OVER (PARTITION BY shard ORDER BY id) AS prev FROM delivered) d")
owners=$(psqlc -c "SELECT string_agg(owner || ':' || n, ' ' ORDER BY owner) FROM (SELECT owner, sum(n) n FROM delivered GROUP BY owner) o")
echo "writing $TOTAL changes alone: $alone ms; written and consumed by a group of 4: $both ms" \
	"(writers done after $((tw - t0)) ms, last delivery $((t1 - tw)) ms later)"
echo "check: $check; per consumer: $owners"
result "4d. end to end: $TOTAL changes, 16 writers, group of 4" "exactly once, in order; ≤ 1.5× writing alone" \
	"$both ms (writers $((tw - t0)) ms, last delivery +$((t1 - tw)) ms); $check" "writing alone $alone ms" "$(calc "$both / $alone")" \
	"$(echo "$check" | grep -q "^$TOTAL delivered .*: true$" && yesno "$both <= 1.5 * $alone" || echo no)"
