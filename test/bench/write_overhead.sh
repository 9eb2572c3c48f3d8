#!/usr/bin/env bash
# Write overhead (SPEC §9 row 1): pgbench TPS of "app row" vs "app row +
# change" (direct INSERT and cfeed.publish), same clients, fsync on, the
# background sweeper stamping meanwhile; and the drain rate against the
# plain single-row insert rate (row 2).
# Usage: bash test/bench/write_overhead.sh [seconds] [clients]
. "$(dirname "$0")/lib.sh"
SECS=${1:-10}
CLIENTS=${2:-8}
bench_start
bench_settings
psqlc -c "CREATE EXTENSION cfeed" -c "SELECT cfeed.create_feed('bench', 4)" >/dev/null
psqlc -c "CREATE TABLE app (id bigserial PRIMARY KEY, payload text, change_id bigint)"
cat > "$BENCH_DIR/plain.sql" <<'SQL'
INSERT INTO app (payload) VALUES ('hello');
SQL
cat > "$BENCH_DIR/direct.sql" <<'SQL'
\set s random(0, 3)
BEGIN;
INSERT INTO app (payload, change_id) VALUES ('hello', nextval('cfeed.change_id')) RETURNING change_id AS cid \gset
INSERT INTO cfeed.change (feed_id, shard, change_id) VALUES (1, :s, :cid);
END;
SQL
cat > "$BENCH_DIR/publish.sql" <<'SQL'
\set s random(0, 3)
INSERT INTO app (payload, change_id) VALUES ('hello', cfeed.publish(1, :s));
SQL
cat > "$BENCH_DIR/cte.sql" <<'SQL'
\set s random(0, 3)
WITH c AS (INSERT INTO cfeed.change (feed_id, shard, change_id) VALUES (1, :s, nextval('cfeed.change_id')) RETURNING change_id) INSERT INTO app (payload, change_id) SELECT 'hello', change_id FROM c;
SQL
cat > "$BENCH_DIR/two.sql" <<'SQL'
WITH c AS (INSERT INTO app (payload) VALUES ('x') RETURNING id) INSERT INTO app (payload) SELECT 'hello' FROM c;
SQL
chmod 644 "$BENCH_DIR"/*.sql
run()
{
	pgbenchc -n -c "$CLIENTS" -j 2 -T "$SECS" -f "$BENCH_DIR/$1.sql" 2>/dev/null | sed -n 's/^tps = \([0-9.]*\).*/\1/p'
}
plain=$(run plain)
direct=$(run direct)
publish=$(run publish)
cte=$(run cte)
two=$(run two)
pending=$(psqlc -c "SELECT count(*) FROM cfeed.change WHERE change_sequence_number IS NULL")
echo "plain insert:         $plain tps"
echo "app row + change:     $direct tps (ratio $(echo "scale=2; $direct / $plain" | bc))"
echo "app row + publish():  $publish tps (ratio $(echo "scale=2; $publish / $plain" | bc))"
echo "app row + change, one statement (CTE): $cte tps (ratio $(echo "scale=2; $cte / $plain" | bc))"
echo "two plain rows, one statement (floor of any 2-row write): $two tps (ratio $(echo "scale=2; $two / $plain" | bc))"
echo "left pending at the end (sweeper keeping up => ~0): $pending"
