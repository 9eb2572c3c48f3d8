#!/bin/bash
# demo.sh: see cfeed work in under a minute, on a throwaway server.
#
# Run on Debian 12 from anywhere:  bash demo.sh  (as root, or as a user who
# may sudo: it re-runs itself under sudo).  Installs what is missing
# (PostgreSQL 15 -- 17 on Debian 13, 18 on unstable -- and the build tools),
# builds and installs cfeed, starts a temporary preloaded server in a temp directory
# (Unix socket only), then: a reader long-polls a feed in the background, a
# writer records orders and their changes (one transaction rolls back), a
# sweep stamps them, and the reader prints what it received.  Everything is
# stopped and removed at the end.

set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")"

if [ "$(id -u)" -ne 0 ]; then
	if command -v sudo >/dev/null 2>&1; then
		exec sudo bash "$PWD/demo.sh" "$@"
	fi
	echo "demo.sh: run as root (it installs packages and the extension)" >&2
	exit 2
fi

# The PostgreSQL of this Debian release (the highest installed, if any).
PGMAJOR=$( (ls -d /usr/lib/postgresql/*/bin/pg_config 2>/dev/null || true) |
	sed 's|/usr/lib/postgresql/||; s|/.*||' | sort -n | tail -n 1)
if [ -z "$PGMAJOR" ]; then
	case "$(. /etc/os-release 2>/dev/null && echo "${VERSION_CODENAME:-}")" in
		bookworm) PGMAJOR=15 ;;
		trixie) PGMAJOR=17 ;;
		*) PGMAJOR=18 ;;
	esac
fi
PGBIN=/usr/lib/postgresql/$PGMAJOR/bin
export PATH="$PGBIN:$PATH"
PACKAGES=(build-essential "postgresql-$PGMAJOR" "postgresql-server-dev-$PGMAJOR" libipc-run-perl libpq-dev)

say() { printf '\n== %s\n' "$*"; }

# 1. Packages
missing=()
for p in "${PACKAGES[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
	say "installing ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	aptlog=$(mktemp)
	if ! { apt-get update -qq && apt-get install -y -qq --no-install-recommends "${missing[@]}"; } \
		>"$aptlog" 2>&1; then
		cat "$aptlog"
		exit 1
	fi
	rm -f "$aptlog"
fi

# 2. Build and install
say "building and installing cfeed"
buildlog=$(mktemp)
if ! { make with_llvm=no PG_CONFIG="$PGBIN/pg_config" &&
	make install with_llvm=no PG_CONFIG="$PGBIN/pg_config"; } >"$buildlog" 2>&1; then
	cat "$buildlog"
	exit 1
fi
rm -f "$buildlog"

# 3. A throwaway server: socket in its own directory, no TCP
DIR=$(mktemp -d /tmp/cfeed-demo.XXXXXX)
chown postgres: "$DIR"
chmod 700 "$DIR"
PORT=54987
READER_PID=
cleanup() {
	[ -n "$READER_PID" ] && kill "$READER_PID" 2>/dev/null || true
	if [ -f "$DIR/data/postmaster.pid" ]; then
		as_pg pg_ctl -D "$DIR/data" -m immediate -w stop >/dev/null 2>&1 || true
	fi
	rm -rf "$DIR"
}
trap cleanup EXIT

# As postgres, from / (psql complains about a working directory postgres
# cannot enter, such as root's home).
as_pg() { (cd / && exec runuser -u postgres -- env PATH="$PATH" "$@"); }
sql() { as_pg psql -X -q -At -v ON_ERROR_STOP=1 -h "$DIR" -p "$PORT" -d demo "$@"; }

say "starting a temporary server in $DIR"
as_pg initdb -D "$DIR/data" -A trust -N >/dev/null
cat >>"$DIR/data/postgresql.conf" <<CONF
shared_preload_libraries = 'cfeed'
listen_addresses = ''
unix_socket_directories = '$DIR'
port = $PORT
fsync = off
CONF
if ! as_pg pg_ctl -D "$DIR/data" -l "$DIR/server.log" -w start >/dev/null; then
	cat "$DIR/server.log"
	exit 1
fi
as_pg createdb -h "$DIR" -p "$PORT" demo

# 4. A feed and an application table
say "creating feed 'orders' (1 shard) and table orders"
sql <<'SQL'
CREATE EXTENSION cfeed;
SELECT cfeed.create_feed('orders', 1, 1) \g /dev/null
CREATE TABLE orders (id int PRIMARY KEY, item text NOT NULL, change_id bigint);
SQL

# 5. A reader long-polling shard 0 from the beginning, in the background:
#    each call waits up to 5 s server-side for changes after its cursor.
EXPECTED=5
cat >"$DIR/reader.sh" <<READER
cursor=NULL
got=0
end=\$((SECONDS + 30))
while [ "\$got" -lt $EXPECTED ] && [ "\$SECONDS" -lt "\$end" ]; do
	# long-poll first, then join in a later statement: its snapshot sees the
	# order rows that committed while the read was waiting
	page=\$(psql -X -q -At -F ' ' -v ON_ERROR_STOP=1 -h '$DIR' -p $PORT -d demo \\
		-c "CREATE TEMP TABLE page AS SELECT * FROM cfeed.read(1, 0, \$cursor, 100, 5000)" \\
		-c "SELECT p.change_sequence_number, p.change_id, o.item
			FROM page p LEFT JOIN orders o USING (change_id)
			ORDER BY p.change_sequence_number")
	while read -r csn id item; do
		[ -n "\$csn" ] || continue
		echo "reader: #\$csn  change_id \$id  \$item"
		cursor=\$csn
		got=\$((got + 1))
	done <<<"\$page"
done
echo "reader: done, cursor \$cursor"
READER
chown postgres: "$DIR/reader.sh"
as_pg bash "$DIR/reader.sh" >"$DIR/reader.out" 2>&1 &
READER_PID=$!
sleep 0.5

# 6. A writer: each order and its change commit (or roll back) together
say "writer: 3 transactions commit 5 orders, 1 transaction rolls back"
sql <<'SQL'
BEGIN;
INSERT INTO orders VALUES (1, 'apples', cfeed.publish(1, 0));
INSERT INTO orders VALUES (2, 'pears', cfeed.publish(1, 0));
COMMIT;
BEGIN;
INSERT INTO orders VALUES (99, 'never committed', cfeed.publish(1, 0));
ROLLBACK;
BEGIN;
INSERT INTO orders VALUES (3, 'plums', cfeed.publish(1, 0));
COMMIT;
BEGIN;
INSERT INTO orders VALUES (4, 'figs', cfeed.publish(1, 0));
INSERT INTO orders VALUES (5, 'dates', cfeed.publish(1, 0));
COMMIT;
SQL

# 7. Sweep (the background sweeper has probably done it already)
say "sweeping"
sql -c "CALL cfeed.sweep_loop(0, 0, 0, 0, null, null, null)" >/dev/null
echo "head of shard 0: $(sql -c 'SELECT cfeed.head(1, 0)')"

# 8. What the reader got
wait "$READER_PID" || true
READER_PID=
say "what the reader received"
cat "$DIR/reader.out"
got=$(grep -c '^reader: #' "$DIR/reader.out" || true)
if [ "$got" -ne "$EXPECTED" ] || grep -q 'never committed' "$DIR/reader.out"; then
	echo "demo.sh: expected exactly the $EXPECTED committed orders" >&2
	exit 1
fi
say "done: $got changes, numbered without gaps, the rolled-back one never appeared"
