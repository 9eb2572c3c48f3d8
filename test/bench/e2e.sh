#!/usr/bin/env bash
# End to end (SPEC §9 row 9): TOTAL changes written by 16 pgbench clients to
# an 8-shard feed, read by a consumer group of 4 (cfeed.acquire / read /
# checkpoint loops in 4 background psql sessions, each page recorded in a
# `delivered` table in the checkpoint's transaction).  Checks every change
# was delivered exactly once and in shard order; compares the time from the
# first write to the last delivery with writing alone (another feed).
# Usage: bash test/bench/e2e.sh [total]
. "$(dirname "$0")/lib.sh"
TOTAL=${1:-100000}
bench_start
bench_settings
psqlc -c "CREATE EXTENSION cfeed" -c "SELECT cfeed.create_feed('alone', 8)" -c "SELECT cfeed.create_feed('e2e', 8)" \
	-c "CREATE TABLE delivered (id bigserial PRIMARY KEY, owner text, shard int, csn bigint, change_id bigint)" >/dev/null
for f in 1 2; do
	printf '%s\n' '\set s random(0, 7)' "SELECT cfeed.publish($f, :s);" > "$BENCH_DIR/w$f.sql"
done
chmod 644 "$BENCH_DIR"/*.sql
write() { pgbenchc -n -c 16 -j 2 -t $((TOTAL / 16)) -f "$BENCH_DIR/w$1.sql" >/dev/null 2>&1; }
t0=$(now_ms); write 1; t1=$(now_ms)
alone=$((t1 - t0))
consumer()
{
	bg_sql "c$1" "DO \$\$
DECLARE l record; n int; last bigint; got int;
BEGIN
	LOOP
		got := 0;
		FOR l IN SELECT * FROM cfeed.acquire('g', 2, 'c$1', 3000) LOOP
			BEGIN
				WITH r AS (SELECT * FROM cfeed.read(2, l.shard, l.cursor, 1000)),
				     i AS (INSERT INTO delivered (owner, shard, csn, change_id)
				           SELECT 'c$1', l.shard, change_sequence_number, change_id FROM r
				           ORDER BY change_sequence_number RETURNING csn)
				SELECT count(*), max(csn) INTO n, last FROM i;
				IF n > 0 THEN
					PERFORM cfeed.checkpoint('g', 2, l.shard, 'c$1', l.epoch, last);
					got := got + n;
				END IF;
			EXCEPTION WHEN object_not_in_prerequisite_state THEN NULL;	-- lease moved: page undone
			END;
		END LOOP;
		COMMIT;
		IF got = 0 THEN
			EXIT WHEN (SELECT sum(cursor - 2000000000000000) FROM cfeed.lease WHERE group_name = 'g') >= $TOTAL;
			PERFORM pg_sleep(0.005);
		END IF;
	END LOOP;
END \$\$"
}
for c in 1 2 3 4; do consumer $c; done
t0=$(now_ms); write 2
while [ "$(psqlc -c "SELECT count(*) FROM pg_stat_activity WHERE application_name LIKE 'bench_bg_c%'")" != 0 ]; do sleep 0.05; done
t1=$(now_ms)
both=$((t1 - t0))
check=$(psqlc -c "SELECT count(*) || ' delivered, ' || count(DISTINCT change_id) || ' distinct; in order: ' ||
	bool_and(ok) FROM (SELECT change_id, csn = 2000000000000000 + row_number() OVER (PARTITION BY shard ORDER BY id) AS ok FROM delivered) d")
owners=$(psqlc -c "SELECT string_agg(owner || ':' || n, ' ' ORDER BY owner) FROM (SELECT owner, count(*) n FROM delivered GROUP BY owner) o")
echo "writing $TOTAL changes alone: $alone ms; written and consumed by a group of 4: $both ms (ratio $(calc "$both / $alone"))"
echo "check: $check; per consumer: $owners"
ok=$([ "$check" = "$TOTAL delivered, $TOTAL distinct; in order: true" ] && [ "$(calc "$both <= 1.5 * $alone")" = 1 ] && echo yes || echo no)
result "end to end: $TOTAL changes, 16 writers, group of 4" "exactly once, in order; ≤ 1.5× writing alone" \
	"$both ms; $check" "writing alone $alone ms" "$(calc "$both / $alone")" "$ok"
