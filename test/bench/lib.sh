# Shared helpers for the cfeed benchmarks: a throwaway cluster in a temp
# dir, on a unix socket and a non-default port, run as user postgres.
# Sourced by the bench scripts; they must be started as root or postgres.
set -euo pipefail

PGBIN=$(pg_config --bindir)
export PATH="$PGBIN:$PATH"
BENCH_PORT=${BENCH_PORT:-54399}
BENCH_DIR=$(mktemp -d /tmp/cfeed-bench.XXXXXX)
chmod 755 "$BENCH_DIR"

as_pg()
{
	if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

bench_start()
{
	chown postgres "$BENCH_DIR"
	as_pg initdb -D "$BENCH_DIR/data" -A trust >/dev/null
	cat >> "$BENCH_DIR/data/postgresql.conf" <<CONF
shared_preload_libraries = 'cfeed'
listen_addresses = ''
unix_socket_directories = '$BENCH_DIR'
port = $BENCH_PORT
max_connections = 100
shared_buffers = 512MB
max_wal_size = 4GB
fsync = ${BENCH_FSYNC:-on}
${BENCH_EXTRA_CONF:-}
CONF
	as_pg pg_ctl -D "$BENCH_DIR/data" -l "$BENCH_DIR/log" -w start >/dev/null
	trap bench_stop EXIT
	trap "exit 143" INT TERM
}

bench_stop()
{
	as_pg pg_ctl -D "$BENCH_DIR/data" -m immediate stop >/dev/null 2>&1 || true
	rm -rf "$BENCH_DIR"
}

psqlc()
{
	as_pg psql -X -q -At -h "$BENCH_DIR" -p "$BENCH_PORT" -d postgres "$@"
}

pgbenchc()
{
	as_pg pgbench -h "$BENCH_DIR" -p "$BENCH_PORT" "$@" postgres
}

# Milliseconds since the epoch.
now_ms()
{
	date +%s%3N
}

bench_settings()
{
	psqlc -c "SELECT 'settings: ' || string_agg(name || '=' || setting, ' ' ORDER BY name) FROM pg_settings WHERE name IN ('fsync','synchronous_commit','shared_buffers','max_wal_size')"
	psqlc -c "SELECT 'server: ' || version()"
	psqlc -c "SELECT 'extensions available: ' || string_agg(name || ' ' || default_version, ', ' ORDER BY name) FROM pg_available_extensions WHERE name IN ('cfeed', 'pgq')"
	echo "wal2json: $(dpkg-query -W -f '${Version}' postgresql-15-wal2json 2>/dev/null || echo absent); machine: $(nproc) cores"
}

# Peers (Debian packages, see run-all.sh); a script skips a peer row when absent.
have_pgq()
{
	[ -f "$(pg_config --sharedir)/extension/pgq.control" ]
}
have_wal2json()
{
	[ -f "$(pg_config --pkglibdir)/wal2json.so" ]
}
# postgresql.conf lines for a logical-decoding peer (wal2json slots).
LOGICAL_CONF="wal_level = logical
max_replication_slots = 10
output_plugin_libraries = 'pgoutput, test_decoding, wal2json'"

# One line of the summary table, collected by run-all.sh into RESULTS.md:
# result ROW TARGET MEASURED BASELINE RATIO MET
result()
{
	local IFS='|'
	echo "RESULT|$*"
}

# CPU time of a process in microseconds (schedstat: ns on CPU).
cpu_us()
{
	echo $(( $(cut -d' ' -f1 "/proc/$1/schedstat") / 1000 ))
}

# Float arithmetic: calc EXPR [scale]
calc()
{
	echo "scale=${2:-2}; $1" | bc
}

# Run SQL in the background in its own session, tagged for stop_bg.
bg_sql()
{
	as_pg env PGAPPNAME="bench_bg_$1" psql -X -q -h "$BENCH_DIR" -p "$BENCH_PORT" -d postgres -c "$2" >/dev/null 2>&1 &
}
stop_bg()
{
	psqlc -c "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = 'bench_bg_$1'" >/dev/null
}
