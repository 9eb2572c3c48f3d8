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
	echo "machine: $(nproc) cores"
}
