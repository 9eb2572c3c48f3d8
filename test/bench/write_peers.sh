#!/usr/bin/env bash
# Write overhead against the peers (SPEC §9 row 1), one cluster with
# wal_level = logical, 8 clients, one app row per transaction: app row alone;
# + cfeed.publish() (sweeper stamping meanwhile); + PgQ insert_event in the
# same statement; app row alone while a wal2json slot is drained every 10 ms.
# Usage: bash test/bench/write_peers.sh [seconds] [clients]
. "$(dirname "$0")/lib.sh"
SECS=${1:-10}
CLIENTS=${2:-8}
BENCH_EXTRA_CONF="$LOGICAL_CONF" bench_start
bench_settings
psqlc -c "CREATE EXTENSION cfeed" -c "SELECT cfeed.create_feed('bench', 4)" \
	-c "CREATE TABLE app (id bigserial PRIMARY KEY, payload text, change_id bigint)" >/dev/null
echo "INSERT INTO app (payload) VALUES ('hello');" > "$BENCH_DIR/plain.sql"
printf '%s\n' '\set s random(0, 3)' "INSERT INTO app (payload, change_id) VALUES ('hello', cfeed.publish(1, :s));" > "$BENCH_DIR/cfeed.sql"
echo "INSERT INTO app (payload, change_id) VALUES ('hello', pgq.insert_event('q', 'app', 'hello'));" > "$BENCH_DIR/pgq.sql"
chmod 644 "$BENCH_DIR"/*.sql
run()
{
	psqlc -c "CHECKPOINT"
	pgbenchc -n -c "$CLIENTS" -j 2 -T "$SECS" -f "$BENCH_DIR/$1.sql" 2>/dev/null | sed -n 's/^tps = \([0-9]*\).*/\1/p'
}
plain=$(run plain)
cfeed=$(run cfeed)
echo "app row alone:            $plain tps"
echo "app row + cfeed.publish:  $cfeed tps (ratio $(calc "$cfeed / $plain"))"
if have_pgq; then
	psqlc -c "CREATE EXTENSION pgq" -c "SELECT pgq.create_queue('q')" >/dev/null
	pgq=$(run pgq)
	echo "app row + pgq.insert_event: $pgq tps (ratio $(calc "$pgq / $plain"))"
else
	pgq=; echo "PgQ not installed: PgQ row skipped"
fi
if have_wal2json; then
	psqlc -c "SELECT pg_create_logical_replication_slot('w', 'wal2json')" >/dev/null
	bg_sql drain "DO \$\$ BEGIN LOOP PERFORM count(*) FROM pg_logical_slot_get_changes('w', NULL, NULL, 'format-version', '2'); COMMIT; PERFORM pg_sleep(0.01); END LOOP; END \$\$"
	w2j=$(run plain)
	stop_bg drain
	echo "app row, wal2json slot drained every 10 ms: $w2j tps (ratio $(calc "$w2j / $plain"))"
else
	w2j=; echo "wal2json not installed: logical-decoding row skipped"
fi
met=$([ "$(calc "$cfeed >= 0.8 * $plain")" = 1 ] && [ -z "$pgq" -o "$(calc "$cfeed > 0${pgq}")" = 1 ] && echo yes || echo no)
result "write overhead, app row + change (8 clients)" "≥ 0.8× plain and > PgQ" "$cfeed tps" \
	"plain $plain tps; PgQ ${pgq:-n/a}; wal2json drained ${w2j:-n/a}" \
	"$(calc "$cfeed / $plain")× plain; ${pgq:+$(calc "$cfeed / $pgq")× PgQ}" "$met"
