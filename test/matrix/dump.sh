#!/bin/bash
# test/matrix/dump.sh: the cross-version dump test.  A pg_dump of
# a database with feeds, stamped and pending changes, consumer leases and a
# tracked table, made on one PostgreSQL major, restores into another, which
# then numbers on gaplessly.
#
#   bash test/matrix/dump.sh make FILE      on the old major: writes the dump
#                                           FILE and FILE.state
#   bash test/matrix/dump.sh restore FILE   on the new major: restores FILE and
#                                           checks it; prints "N passed, N failed"
#
# test/run-tests.sh --all makes the dump on 15 and restores it on 17 and 18.
# Run as root after `make install` (of the major on PATH, or PGBIN).  Each
# step starts its own throwaway server (Unix socket only, sweeper off: the
# test sweeps with cfeed.sweep()) and removes it, on port CFEED_DUMP_PORT
# (default: a free one, test/free-port.pl).

set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
PGBIN=${PGBIN:-$(dirname "$(command -v pg_config)")}
export PATH="$PGBIN:$PATH"
PORT=${CFEED_DUMP_PORT:-$(perl "$HERE/../free-port.pl")}

[ $# -eq 2 ] || { sed -n '2,16p' "$0" >&2; exit 2; }
mode=$1
file=$(readlink -f "$2")

DIR=$(mktemp -d /tmp/cfeed-dump.XXXXXX)
chown postgres: "$DIR"
cleanup() {
	if [ -f "$DIR/data/postmaster.pid" ]; then
		as_pg pg_ctl -D "$DIR/data" -m immediate -w stop >/dev/null 2>&1 || true
	fi
	rm -rf "$DIR"
}
trap cleanup EXIT

# psql and friends run as postgres from / (not from a directory postgres
# cannot enter)
as_pg() { (cd / && runuser -u postgres -- env PATH="$PATH" "$@"); }
sql() { as_pg psql -X -q -At -v ON_ERROR_STOP=1 -h "$DIR" -p "$PORT" "$@"; }

as_pg initdb -D "$DIR/data" -A trust -N >/dev/null
cat >>"$DIR/data/postgresql.conf" <<CONF
shared_preload_libraries = 'cfeed'
cfeed.enable_sweeper = off
listen_addresses = ''
unix_socket_directories = '$DIR'
port = $PORT
fsync = off
CONF
as_pg pg_ctl -D "$DIR/data" -l "$DIR/server.log" -w start >/dev/null || {
	cat "$DIR/server.log" >&2
	exit 1
}
version=$(sql -d postgres -c "SELECT split_part(current_setting('server_version'), ' ', 1)")

# What must come through the dump unchanged: feeds, shards (heads, start
# values, groups), every change with its number, the change_id sequence,
# the leases, the tracked table's rows and triggers, and a feed stored in
# ranges (group 3: its changes as read() gives them, with its stamps and
# mark adopted by cfeed.adopt_marks() after the restore).
STATE_SQL=$(cat <<'SQL'
SELECT 'feed', feed_id, name FROM cfeed.feed ORDER BY 2;
SELECT 'shard', feed_id, shard, sweep_group, longpoll, last_change_sequence_number, start_sequence_number
  FROM cfeed.shard ORDER BY 2, 3;
SELECT 'change', feed_id, shard, change_id, change_sequence_number FROM cfeed.change ORDER BY 2, 3, 4;
SELECT 'change_id', last_value FROM cfeed.change_id;
SELECT 'lease', group_name, feed_id, shard, owner, cursor, epoch FROM cfeed.lease ORDER BY 2, 3, 4;
SELECT 'account', id, balance, change_id FROM account ORDER BY 2;
SELECT 'trigger', tgname FROM pg_trigger WHERE tgrelid = 'account'::regclass AND NOT tgisinternal ORDER BY 2;
SELECT 'read', s.feed_id, s.shard, r.change_sequence_number, r.change_id
  FROM cfeed.shard s, cfeed.read(s.feed_id, s.shard, NULL, 100000) r WHERE s.storage = 'ranges' ORDER BY 2, 3, 4;
SQL
)

if [ "$mode" = make ]; then
	sql -d postgres -c 'CREATE DATABASE src'
	sql -d src >/dev/null <<'SQL'
CREATE EXTENSION cfeed;
SELECT cfeed.create_feed('orders', 3);                                  -- feed 1
SELECT cfeed.create_feed('audit', 1, feed_id => 10, sweep_group => 2, longpoll => false);
SELECT cfeed.create_feed('accounts', 2, feed_id => 20);
-- history backfilled below the start value, then live changes
INSERT INTO cfeed.change (feed_id, shard, change_id, change_sequence_number)
VALUES (1, 0, 1, 1999999999999999), (1, 0, 2, 2000000000000000);
SELECT cfeed.publish(1, g % 3) FROM generate_series(1, 30) g;
SELECT cfeed.publish(10, 0) FROM generate_series(1, 5) g;
-- a tracked table: inserts, updates, a delete
CREATE TABLE account (id int PRIMARY KEY, balance int NOT NULL, change_id bigint);
SELECT cfeed.track('account', 20);
INSERT INTO account (id, balance) SELECT g, 100 FROM generate_series(1, 10) g;
UPDATE account SET balance = balance + 1 WHERE id <= 3;
DELETE FROM account WHERE id = 10;
SELECT count(*) FROM cfeed.sweep(0);
SELECT count(*) FROM cfeed.sweep(2);
-- a consumer group: two members share feed 1, one checkpointed
SELECT * FROM cfeed.acquire('billing', 1, 'worker-a', 21600000);
SELECT * FROM cfeed.acquire('billing', 1, 'worker-b', 21600000);
SELECT cfeed.checkpoint(l.group_name, l.feed_id, l.shard, l.owner, l.epoch, l.cursor + 2)
FROM cfeed.lease l WHERE l.owner = 'worker-a' ORDER BY l.shard LIMIT 1;
-- pending (committed, not yet swept) changes, plain and tracked
SELECT cfeed.publish(1, g % 3) FROM generate_series(1, 7) g;
INSERT INTO account (id, balance) VALUES (11, 5), (12, 6);
UPDATE account SET balance = 0 WHERE id = 1;
-- a feed stored in ranges in group 3: stamped changes, then pending ones
SET cfeed.default_storage = ranges;
SELECT cfeed.create_feed('ranged', 2, feed_id => 30, sweep_group => 3);
RESET cfeed.default_storage;
SELECT cfeed.publish(30, g % 2) FROM generate_series(1, 12) g;
SELECT count(*) FROM cfeed.sweep(3);
SELECT cfeed.publish(30, g % 2) FROM generate_series(1, 4) g;
SQL
	as_pg pg_dump -h "$DIR" -p "$PORT" -d src -f "$DIR/src.sql"
	cp "$DIR/src.sql" "$file"
	sql -d src -F '|' -c "$STATE_SQL" >"$file.state"
	echo "$version" >"$file.version"
	echo "dump.sh: PostgreSQL $version: dumped $(grep -c '^change|' "$file.state") changes," \
		"$(grep -c '^lease|' "$file.state") leases, a tracked table into $file"
	exit 0
fi

[ "$mode" = restore ] || { sed -n '2,16p' "$0" >&2; exit 2; }
from=$(cat "$file.version" 2>/dev/null || echo '?')
passed=0
failed=0
# result NAME STATUS DETAIL: count one test and print its TAP-style line,
# with DETAIL (text) when it failed
result() {
	if [ "$2" -eq 0 ]; then
		passed=$((passed + 1))
		echo "ok - $1"
	else
		failed=$((failed + 1))
		echo "not ok - $1"
		echo "$3"
	fi
}
check() {
	local name=$1 query=$2 got status=0
	got=$(sql -d dst -c "$query" 2>&1) || true
	[ "$got" = t ] || status=1
	result "$name" $status "got: $got"
}

sql -d postgres -c 'CREATE DATABASE dst'
status=0
as_pg psql -X -q -v ON_ERROR_STOP=1 -h "$DIR" -p "$PORT" -d dst -f "$file" >"$DIR/restore.out" 2>&1 || status=$?
result "the $from dump restores into $version without an error" $status "$(cat "$DIR/restore.out")"
check "cfeed.adopt_marks() adopts the range feed's sweep group" \
	"SELECT string_agg(sweep_group::text, ',') = '3' FROM cfeed.adopt_marks()"

sql -d dst -F '|' -c "$STATE_SQL" >"$DIR/state" 2>&1 || true
status=0
diff -u "$file.state" "$DIR/state" >"$DIR/state.diff" || status=$?
result "feeds, shards, changes and their numbers, change_id, leases and the tracked table are as dumped" \
	$status "$(cat "$DIR/state.diff")"

# The gapless check of test/t/CfeedCheck.pm (test/gaps.sql counts the
# shards with a gap, whether stored in rows or, through read(), in ranges).
GAPLESS="SELECT ($(sed '/^--/d' "$HERE/../gaps.sql")) = 0"

sql -d dst >/dev/null <<'SQL'
CREATE TABLE old_head AS SELECT feed_id, shard, last_change_sequence_number AS head FROM cfeed.shard;
CREATE TABLE old_pending AS SELECT feed_id, shard, pending AS n FROM cfeed.stats;
CREATE TABLE old_change_id AS SELECT last_value FROM cfeed.change_id;
SELECT count(*) FROM cfeed.sweep(0);
SELECT count(*) FROM cfeed.sweep(3);
SQL
check "the pending changes of $from are swept on from the old heads" \
	"SELECT bool_and(s.last_change_sequence_number = h.head + COALESCE(p.n, 0))
	 FROM cfeed.shard s JOIN old_head h USING (feed_id, shard)
	 LEFT JOIN old_pending p USING (feed_id, shard)
	 WHERE s.sweep_group IN (0, 3)"
check "the range feed had changes pending" \
	"SELECT sum(n) = 4 FROM old_pending WHERE feed_id = 30"
check "nothing is left unstamped" \
	"SELECT NOT EXISTS (SELECT FROM cfeed.stats WHERE pending > 0)"

sql -d dst >/dev/null <<'SQL'
CREATE TABLE new_ids AS SELECT cfeed.publish(1, g % 3) AS id FROM generate_series(1, 9) g;
INSERT INTO new_ids SELECT cfeed.publish(10, 0) FROM generate_series(1, 2) g;
INSERT INTO account (id, balance) VALUES (13, 7);
UPDATE account SET balance = balance + 10 WHERE id = 2;
DELETE FROM account WHERE id = 11;
SELECT count(*) FROM cfeed.sweep(0);
SELECT count(*) FROM cfeed.sweep(2);
SQL
check "every shard is gapless and its head is its highest number" "$GAPLESS"
check "the heads moved by exactly what was pending and written since" \
	"SELECT sum(s.last_change_sequence_number - h.head) = 9 + 2 + 3 + (SELECT sum(n) FROM old_pending)
	 FROM cfeed.shard s JOIN old_head h USING (feed_id, shard)"
check "new change_ids continue after the restored sequence position" \
	"SELECT min(id) > (SELECT last_value FROM old_change_id) FROM new_ids"
check "the tracked table publishes on, with row images: its pending and new changes" \
	"SELECT string_agg(op || ':' || (r.row->>'id'), ',' ORDER BY op, (r.row->>'id')::int)
	        = 'delete:11,insert:11,insert:12,insert:13,update:1,update:2'
	 FROM old_head h, cfeed.read_rows(20, h.shard, h.head, 1000) r
	 WHERE h.feed_id = 20"
check "a reader from the beginning reads history, old and new changes in order" \
	"SELECT array_agg(change_sequence_number ORDER BY change_sequence_number)
	        = array_agg(change_sequence_number)
	    AND count(*) = (SELECT count(*) FROM cfeed.change WHERE feed_id = 1 AND shard = 0)
	 FROM cfeed.read(1, 0, NULL, 100000)"
check "a lease holder renews its restored leases at the same epoch and cursor" \
	"SELECT array_agg((a.shard, a.cursor, a.epoch) ORDER BY a.shard)
	        = (SELECT array_agg((l.shard, l.cursor, l.epoch) ORDER BY l.shard)
	           FROM cfeed.lease l WHERE l.group_name = 'billing' AND l.owner = 'worker-a')
	    AND count(*) > 0
	 FROM cfeed.acquire('billing', 1, 'worker-a', 21600000) a"
check "it checkpoints on to the new head" \
	"SELECT count(*) = 1 FROM (
	   SELECT cfeed.checkpoint('billing', 1, l.shard, 'worker-a', l.epoch, cfeed.head(1, l.shard))
	   FROM cfeed.lease l WHERE l.group_name = 'billing' AND l.owner = 'worker-a'
	   ORDER BY l.shard LIMIT 1) x"

echo "cross-version dump ($from -> $version): $passed passed, $failed failed"
[ "$failed" -eq 0 ]
