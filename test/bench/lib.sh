# Shared helpers for the cfeed benchmarks: a throwaway cluster in a temp
# dir, on a unix socket only and a port of the 5460x range, run as user
# postgres.  Sourced by the bench scripts, which are started as root (or
# postgres); the cluster is stopped and removed when the script exits.
# Environment: BENCH_PREFIX, a private PostgreSQL made by prefix.sh, used
# instead of the one whose pg_config comes first in PATH; BENCH_PORT,
# BENCH_FSYNC, BENCH_EXTRA_CONF; BENCH_DB, the database psqlc, pgbenchc and
# bg_sql connect to (postgres).
# shellcheck disable=SC2034	# CONNINFO, LOGICAL_CONF: for the sourcing scripts
set -euo pipefail

if [ -n "${BENCH_PREFIX:-}" ]; then
	if ! [ -x "$BENCH_PREFIX/bin/postgres" ]; then
		echo "BENCH_PREFIX=$BENCH_PREFIX holds no PostgreSQL: run test/bench/prefix.sh $BENCH_PREFIX first" >&2
		exit 1
	fi
	PGBIN=$(readlink -f "$BENCH_PREFIX/bin")
else
	PGBIN=$(pg_config --bindir)
fi
export PATH="$PGBIN:$PATH"
BENCH_PORT=${BENCH_PORT:-54601}
BENCH_DIR=$(mktemp -d /tmp/cfeed-bench.XXXXXX)
chmod 755 "$BENCH_DIR"
trap 'rm -rf "$BENCH_DIR"' EXIT		# until bench_start (a tool that fails to build)
CONNINFO="host=$BENCH_DIR port=$BENCH_PORT dbname=postgres"

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
	trap bench_stop EXIT
	trap "exit 143" INT TERM
	as_pg pg_ctl -D "$BENCH_DIR/data" -l "$BENCH_DIR/log" -w start >/dev/null
}

# bench_standby NAME PORT: a hot standby of the cluster, streaming from it,
# in $BENCH_DIR/NAME on PORT (same socket directory); prints its conninfo.
bench_standby()
{
	as_pg pg_basebackup -h "$BENCH_DIR" -p "$BENCH_PORT" -D "$BENCH_DIR/$1" -R -X stream -c fast
	printf '%s\n' "port = $2" "hot_standby = on" >> "$BENCH_DIR/$1/postgresql.conf"
	as_pg pg_ctl -D "$BENCH_DIR/$1" -l "$BENCH_DIR/$1.log" -w start >/dev/null
	echo "host=$BENCH_DIR port=$2 dbname=postgres"
}

# Background jobs of the script (pgbench loads, psql sessions) go first,
# then every cluster in $BENCH_DIR (the standbys too).
bench_stop()
{
	local pids d
	pids=$(jobs -p)
	[ -z "$pids" ] || kill $pids 2>/dev/null || true
	for d in "$BENCH_DIR"/*/postmaster.pid; do
		[ ! -f "$d" ] || as_pg pg_ctl -D "$(dirname "$d")" -m immediate stop >/dev/null 2>&1 || true
	done
	rm -rf "$BENCH_DIR"
}

psqlc()
{
	as_pg psql -X -q -At -v ON_ERROR_STOP=1 -h "$BENCH_DIR" -p "$BENCH_PORT" -d "${BENCH_DB:-postgres}" "$@"
}

pgbenchc()
{
	as_pg pgbench -h "$BENCH_DIR" -p "$BENCH_PORT" "$@" "${BENCH_DB:-postgres}"
}

# tps CLIENTS SECONDS SCRIPT: pgbench throughput (integer tps) of a script
# in $BENCH_DIR, after a checkpoint so that runs start alike.
tps()
{
	psqlc -c "CHECKPOINT"
	pgbenchc -n -c "$1" -j 2 -T "$2" -f "$BENCH_DIR/$3" 2>/dev/null | sed -n 's/^tps = \([0-9]*\).*/\1/p'
}

# CPU time (user + system, microseconds) the cluster has used: the
# postmaster, its live children, and the children it has reaped (backends
# that exited).
cluster_cpu_us()
{
	local pm c
	pm=$(head -1 "$BENCH_DIR/data/postmaster.pid")
	{
		awk '{ print $14 + $15 + $16 + $17 }' "/proc/$pm/stat"
		for c in $(pgrep -P "$pm"); do awk '{ print $14 + $15 }' "/proc/$c/stat" 2>/dev/null || true; done
	} | awk -v hz="$(getconf CLK_TCK)" '{ s += $1 } END { printf "%d\n", s * 1000000 / hz }'
}

# tps_cpu CLIENTS SECONDS SCRIPT [PGBENCH OPTION...]: "TPS CPU WAL P99
# MAX" of a pgbench run: TPS as tps; CPU the server's CPU time per
# transaction in microseconds (sweeper and background processes included,
# pgbench not); WAL the bytes of WAL written per transaction (the
# sweeper's included: the run is over once the sweeper, when on, has
# stamped every change it wrote); P99 and MAX the transactions' latency in
# milliseconds (pgbench's per-transaction log).
tps_cpu()
{
	local clients=$1 secs=$2 script=$3 c0 c1 w0 w1 out n
	shift 3
	psqlc -c "CHECKPOINT"
	rm -f "$BENCH_DIR"/txlog.*
	c0=$(cluster_cpu_us)
	w0=$(psqlc -c "SELECT pg_current_wal_insert_lsn()")
	out=$(pgbenchc -n -c "$clients" -j 2 -T "$secs" -l --log-prefix="$BENCH_DIR/txlog" "$@" -f "$BENCH_DIR/$script" 2>/dev/null)
	sleep 0.5			# the backends exit and are reaped
	swept
	c1=$(cluster_cpu_us)
	w1=$(psqlc -c "SELECT pg_current_wal_insert_lsn()")
	echo "$w0 $w1" > "$BENCH_DIR/wal_range"	# for sweep_wal
	n=$(echo "$out" | sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p')
	echo "$(echo "$out" | sed -n 's/^tps = \([0-9]*\).*/\1/p') $(((c1 - c0) / n))" \
		"$(psqlc -c "SELECT round(pg_wal_lsn_diff('$w1', '$w0') / $n)")" \
		"$(cat "$BENCH_DIR"/txlog.* | awk '{ print $3 }' | sort -n |
			awk '{ v[NR] = $1 } END { i = int(NR * 0.99); if (i < NR * 0.99) i++; printf "%.2f %.2f", v[i] / 1000, v[NR] / 1000 }')"
}

# sweep_wal FROM TO: the bytes of WAL (full-page images included) between
# the two LSNs written by the sweeps' transactions: those that wrote a
# cfeed.stamp or cfeed.sweep_mark row or updated a cfeed.change row (a
# stamp in rows; writers only insert), all their records counted, their
# commits too (pg_waldump).  What else ran meanwhile (an autovacuum, which
# writes without an xid; a checkpoint) is left out.
sweep_wal()
{
	local rels change
	rels=$(psqlc -c "SELECT pg_relation_filenode('cfeed.stamp') || ' ' || pg_relation_filenode('cfeed.sweep_mark')")
	change=$(psqlc -c "SELECT pg_relation_filenode('cfeed.change')")
	as_pg pg_waldump -p "$BENCH_DIR/data/pg_wal" -s "$1" -e "$2" 2>/dev/null |
		awk -v rels="$rels" -v change="$change" '
			BEGIN { n = split(rels, a, " "); for (i = 1; i <= n; i++) stamp[a[i]] = 1 }
			match($0, /tx: *[0-9]+/) {
				tx = substr($0, RSTART + 3, RLENGTH - 3) + 0
				if (tx == 0) next
				match($0, /len \(rec\/tot\): *[0-9]+\/ *[0-9]+/)
				len = substr($0, RSTART, RLENGTH)
				sub(/.*\/ */, "", len)
				bytes[tx] += len
				rest = $0
				while (match(rest, /rel [0-9]+\/[0-9]+\/[0-9]+/)) {
					f = substr(rest, RSTART, RLENGTH)
					sub(/.*\//, "", f)
					if ((f in stamp) || (f == change && $0 ~ /desc: (HOT_)?UPDATE/))
						sweep[tx] = 1
					rest = substr(rest, RSTART + RLENGTH)
				}
			}
			END { for (t in sweep) total += bytes[t]; print total + 0 }'
}

# pending: how many committed changes wait for a stamp, in all feeds
# (cfeed.stats: whatever the feeds' storage).
pending()
{
	psqlc -c "SELECT coalesce(sum(pending), 0) FROM cfeed.stats"
}

# swept: when cfeed is installed and its background sweeper on, or the
# database ($BENCH_DB) has the SQL edition (whose sweeper the script runs),
# wait (up to 10 s) until every committed change is stamped; says so on
# stderr when they are not (what follows then runs beside the sweep).
swept()
{
	local i
	if [ "$(psqlc -c "SELECT count(*) FROM pg_extension WHERE extname = 'cfeed'")" = 1 ]; then
		[ "$(psqlc -c "SHOW cfeed.enable_sweeper")" = on ] || return 0
	else
		[ "$(psqlc -c "SELECT to_regclass('cfeed.stats') IS NOT NULL")" = t ] || return 0
	fi
	for i in $(seq 100); do
		[ "$(pending)" != 0 ] || return 0
		sleep 0.1
	done
	echo "swept: $(pending) changes still pending after 10 s" >&2
}

# sql_file NAME LINE...: a pgbench script in $BENCH_DIR, readable by postgres.
sql_file()
{
	local name=$1
	shift
	printf '%s\n' "$@" > "$BENCH_DIR/$name"
	chmod 644 "$BENCH_DIR/$name"
}

# cc_tool NAME [LIBS...]: build test/bench/NAME.c into $BENCH_DIR/NAME
# (with libpq and LIBS).
cc_tool()
{
	local name=$1
	shift
	cc -O2 -Wall -Wextra -Werror -o "$BENCH_DIR/$name" "$(dirname "${BASH_SOURCE[0]}")/$name.c" \
		-I"$(pg_config --includedir)" -L"$(pg_config --libdir)" -lpq "$@"
}

# Milliseconds since the epoch.
now_ms()
{
	date +%s%3N
}

bench_settings()
{
	psqlc -c "SELECT 'settings: ' || string_agg(name || '=' || current_setting(name), ' ' ORDER BY name) FROM pg_settings WHERE name IN ('fsync', 'synchronous_commit', 'shared_buffers', 'max_wal_size', 'wal_level')"
	psqlc -c "SELECT 'versions: PostgreSQL ' || current_setting('server_version') || ', ' || string_agg(name || ' ' || default_version, ', ' ORDER BY name) || ', wal2json $(wal2json_version)' FROM pg_available_extensions WHERE name IN ('cfeed', 'pgq')"
	echo "machine: $(nproc) cores ($(lscpu | sed -n 's/^Model name: *//p')), $(free -g | awk '/^Mem:/ {print $2}') GB, Linux $(uname -r)"
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
wal2json_version()
{
	if ! have_wal2json; then
		echo absent
	elif [ -n "${BENCH_PREFIX:-}" ]; then
		sed -n 's/^postgresql-[0-9]*-wal2json //p' "$BENCH_PREFIX/peers"
	else
		dpkg-query -W -f '${Version}' "postgresql-$(pg_config --version | sed 's/^PostgreSQL \([0-9]*\).*/\1/')-wal2json"
	fi
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

# median: the median of the numbers on stdin, one per line.
median()
{
	sort -g | awk '{ v[NR] = $1 } END { print ((NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) + 0 }'
}

# Float arithmetic: calc EXPR [scale]; yesno EXPR: "yes" when EXPR is true.
calc()
{
	echo "scale=${2:-2}; $1" | bc | sed 's/^\(-*\)\./\10./'
}
yesno()
{
	[ "$(calc "$1")" = 1 ] && echo yes || echo no
}

# Run SQL in the background in its own session, tagged for stop_bg.
bg_sql()
{
	as_pg env PGAPPNAME="bench_bg_$1" psql -X -q -h "$BENCH_DIR" -p "$BENCH_PORT" -d "${BENCH_DB:-postgres}" -c "$2" >/dev/null 2>&1 &
}
stop_bg()
{
	psqlc -c "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = 'bench_bg_$1'" >/dev/null
}
