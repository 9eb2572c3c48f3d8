#!/bin/bash
# test/valgrind-check.sh: run the pg_regress (and, unless VALGRIND_SUITES says
# otherwise, isolation) suites against a server running under valgrind
# memcheck, then report every valgrind error found in the server's processes.
#
# Called by `make valgrind-check` (run as the postgres user, after `make
# install`).  Settings (environment):
#   VALGRIND_SUITES   "regress isolation" (default) or "regress"
#   VALGRIND_PORT     port of the valgrind server (default: a free one,
#                     test/free-port.pl)
#   VALGRIND_SUPP     suppressions file; default: PostgreSQL's
#                     src/tools/valgrind.supp when the server's build tree has
#                     one, else test/valgrind.supp (Debian's postgresql-15 does
#                     not ship it)
#   REGRESS, ISOLATION, PG_REGRESS, PG_ISOLATION_REGRESS: from the Makefile
#
# Exit status: 0 when valgrind reported no error, 1 otherwise (the errors,
# with their stacks, are printed), 2 when a suite itself failed.
#
# Caveat: the Debian server is not built with USE_VALGRIND, so palloc chunks
# are not marked: memcheck sees reads of uninitialised memory and accesses
# outside malloc'd blocks (including past the end of a memory context's
# blocks), not every overrun of a palloc'd chunk inside a block.
set -uo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
PGBIN=$(pg_config --bindir)
export PATH="$PGBIN:$PATH"
port=${VALGRIND_PORT:-$(perl test/free-port.pl)}
suites=${VALGRIND_SUITES:-regress isolation}
dir=$PWD/tmp_valgrind
supp=${VALGRIND_SUPP:-}
if [ -z "$supp" ]; then
	for f in "$(pg_config --pkglibdir)/pgxs/src/tools/valgrind.supp" /usr/share/postgresql/*/valgrind.supp; do
		[ -f "$f" ] && supp=$f && break
	done
fi
[ -z "$supp" ] && supp=$PWD/test/valgrind.supp
echo "valgrind-check: suppressions $supp; suites: $suites"

rm -rf "$dir"
mkdir -p "$dir/vg"
initdb -D "$dir/data" -A trust --no-sync >"$dir/initdb.log" 2>&1 || { cat "$dir/initdb.log"; exit 2; }
cat test/cfeed.conf >>"$dir/data/postgresql.conf"
cat >>"$dir/data/postgresql.conf" <<CONF
port = $port
listen_addresses = ''
unix_socket_directories = '$dir'
max_connections = 30
# valgrind makes everything ~20-50x slower; JIT would only add llvm's noise
jit = off
statement_timeout = 0
CONF

valgrind --tool=memcheck --trace-children=yes --quiet \
	--suppressions="$supp" --gen-suppressions=all \
	--read-var-info=no --leak-check=no --num-callers=30 \
	--log-file="$dir/vg/%p.log" \
	postgres -D "$dir/data" >"$dir/server.log" 2>&1 &
server=$!
for _ in $(seq 1 240); do
	pg_isready -q -h "$dir" -p "$port" && break
	kill -0 "$server" 2>/dev/null || break
	sleep 1
done
pg_isready -q -h "$dir" -p "$port" || {
	echo "valgrind-check: server did not start"
	tail -50 "$dir/server.log"
	cat "$dir"/vg/*.log
	exit 2
}

status=0
export PGHOST=$dir PGPORT=$port
if [[ " $suites " == *" regress "* ]]; then
	$PG_REGRESS --inputdir=. --bindir="$PGBIN" --dbname=contrib_regression --port="$port" --host="$dir" \
		--outputdir=output_valgrind $REGRESS || status=2
fi
if [[ " $suites " == *" isolation "* ]]; then
	PGISOLATIONTIMEOUT=${PGISOLATIONTIMEOUT:-600} \
	$PG_ISOLATION_REGRESS --inputdir=test --bindir="$PGBIN" --dbname=isolation_regression --port="$port" --host="$dir" \
		--outputdir=output_valgrind_iso $ISOLATION || status=2
fi

pg_ctl -D "$dir/data" -m fast -w -t 300 stop >/dev/null 2>&1
wait "$server" 2>/dev/null

# Every valgrind error block: "==PID== <kind>" up to the blank "==PID== " line.
errors=0
for f in "$dir"/vg/*.log; do
	[ -s "$f" ] || continue
	if grep -qE '^==[0-9]+== (Invalid|Conditional jump|Use of uninitialised|Syscall param|Mismatched|Source and destination|Argument|.*uninitialised)' "$f"; then
		errors=$((errors + 1))
		echo "===== $f"
		cat "$f"
	fi
done
echo "valgrind-check: $(ls "$dir"/vg | wc -l) processes traced, $errors with errors"
[ "$errors" -gt 0 ] && exit 1
exit "$status"
