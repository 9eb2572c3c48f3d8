#!/bin/bash
# test/run-tests.sh: build, install and run every test suite of cfeed
# (pg_regress, isolation, TAP) on throwaway servers.
#
#   bash test/run-tests.sh            this machine's PostgreSQL (15 on Debian 12)
#   bash test/run-tests.sh --pg 17    PostgreSQL 17 (or 18, or 15): when this
#                                     machine does not serve that major, in a
#                                     Debian root that does (17 trixie, 18 sid),
#                                     made with debootstrap under /var/tmp on
#                                     first use (~2 minutes) and reused after
#   bash test/run-tests.sh --pg 15 --root
#                                     the same in a Debian root even when this
#                                     machine serves that major (a test run
#                                     that must not touch this machine's
#                                     installed cfeed, e.g. two at once, each
#                                     with its own CFEED_ROOTS)
#   bash test/run-tests.sh --all      15, 17 and 18, the README's first command
#                                     (bash demo.sh) in a fresh Debian 12 root
#                                     (test/matrix/fresh.sh), the cross-version dump
#                                     test (a dump made on 15 restored on 17 and
#                                     18), and the Debian packages of 15, 17 and 18
#                                     built, installed into fresh roots and
#                                     smoke-tested (test/matrix/packages.sh), and
#                                     last the suite (CFEED_QUICK=1) against an
#                                     assert-enabled PostgreSQL 17 (--cassert):
#                                     what CI runs (.ci/run)
#   bash test/run-tests.sh --cassert  the suite against an assert-enabled
#                                     PostgreSQL 17 built from Debian's source
#                                     package in a root of its own, failing on
#                                     any failed Assert (test/matrix/cassert.sh;
#                                     ~15 minutes the first time, root and build
#                                     included, ~9 once they are cached)
#
# Run as root (or as a user who may sudo: it re-runs itself under sudo)
# from anywhere.  Installs what is missing (PostgreSQL, the build
# tools, debootstrap), builds and installs as root, runs the tests as the
# postgres user (initdb refuses root).  CI=true builds with -Werror.  Other
# arguments go to `make installcheck` (e.g. CFEED_QUICK=1, which leaves out
# the slow TAP tests, PROVE_TESTS=test/t/010_worker.pl, TAP_TESTS=).  Exits
# non-zero on any failure, after printing the diffs and logs; the last line
# counts the tests, "tests: N passed, N failed".
#
# Environment: CFEED_TEST_PORT is the port of the pg_regress and isolation
# servers (Unix socket only; unset, `make installcheck` picks a free one);
# CFEED_ROOTS (default /var/tmp) holds the roots; CFEED_FRESH_ROOTS=1
# rebuilds them; CFEED_MATRIX_JOBS (default 2) is how many roots --all runs
# at once.

set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
SRC=$PWD
ROOTSH=$SRC/test/matrix/root.sh
ROOTS=${CFEED_ROOTS:-/var/tmp}
MAJORS=(15 17 18)

usage() { sed -n '2,45p' "$SRC/test/run-tests.sh" >&2; exit 2; }

if [ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null 2>&1; then
	exec sudo bash "$SRC/test/run-tests.sh" "$@"
fi

major=
all=false
cassert=false
in_root=false
dump_out=
dump_in=
make_args=()
while [ $# -gt 0 ]; do
	case "$1" in
		--pg) [ $# -ge 2 ] || usage; major=$2; shift 2 ;;
		--pg=*) major=${1#--pg=}; shift ;;
		--all) all=true; shift ;;
		--cassert) cassert=true; shift ;;
		--root) in_root=true; shift ;;
		# internal, for --all: make the cross-version dump / restore one
		--dump-out) [ $# -ge 2 ] || usage; dump_out=$2; shift 2 ;;
		--dump-in) [ $# -ge 2 ] || usage; dump_in=$2; shift 2 ;;
		-h|--help) usage ;;
		*) make_args+=("$1"); shift ;;
	esac
done

if [ "$(id -u)" -ne 0 ]; then
	echo "run-tests.sh: run as root (it installs the extension and runs the tests as postgres)" >&2
	exit 2
fi

# The major this machine serves: the one installed (the highest), else the
# one its Debian release ships.
local_major() {
	local m codename
	m=$( (ls -d /usr/lib/postgresql/*/bin/pg_config 2>/dev/null || true) |
		sed 's|/usr/lib/postgresql/||; s|/.*||' | sort -n | tail -n 1)
	if [ -n "$m" ]; then
		echo "$m"
		return
	fi
	codename=$(. /etc/os-release 2>/dev/null && echo "${VERSION_CODENAME:-}")
	case "$codename" in
		bookworm) echo 15 ;;
		trixie) echo 17 ;;
		*) echo 18 ;;
	esac
}

# Install the Debian packages that are not installed yet.
install_missing() {
	local p missing=()
	for p in "$@"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
	done
	if [ "${#missing[@]}" -gt 0 ]; then
		export DEBIAN_FRONTEND=noninteractive
		apt-get update
		apt-get install -y --no-install-recommends "${missing[@]}"
	fi
}

# Install those of the Debian packages $@ that this release has and that
# are not installed yet (a package missing from a release leaves its test
# skipped there).  After install_missing, which updates the package lists.
install_available() {
	local p have=()
	for p in "$@"; do
		apt-cache show "$p" >/dev/null 2>&1 && have+=("$p")
	done
	[ "${#have[@]}" -eq 0 ] || install_missing "${have[@]}"
}

# The counts of one suite's output, as "regress 12/12, isolation 12/12, TAP
# 296 (11 files), dump 11/11", and the totals as "PASSED FAILED" in the
# variables counts, n_passed, n_failed.
count_tests() {
	local log=$1 line total failed i=0 sqled= label
	counts=
	n_passed=0
	n_failed=0
	while read -r line; do
		# the SQL edition's suites (sqled/Makefile) and the range-storage pass
		# (installcheck-ranges) have headers of their own
		if [[ $line =~ ^\+\+\+\ (sqled|ranges)\ (isolation\ )?install-check\ \+\+\+$ ]]; then
			sqled="${BASH_REMATCH[1]} ${BASH_REMATCH[2]:+isolation}"
			sqled=${sqled% }
			continue
		fi
		if [[ $line =~ All\ ([0-9]+)\ tests\ passed ]]; then
			total=${BASH_REMATCH[1]}
			failed=0
		elif [[ $line =~ ([0-9]+)\ of\ ([0-9]+)\ tests\ failed ]]; then
			total=${BASH_REMATCH[2]}
			failed=${BASH_REMATCH[1]}
		else
			continue
		fi
		if [ -n "$sqled" ]; then
			label=$sqled
			sqled=
		else
			i=$((i + 1))
			[ "$i" -le 2 ] || continue
			[ "$i" -eq 1 ] && label="regress" || label="isolation"
		fi
		counts+=", $label $((total - failed))/$total"
		n_passed=$((n_passed + total - failed))
		n_failed=$((n_failed + failed))
	done < <(grep -aE '^\+\+\+ (sqled|ranges) (isolation )?install-check \+\+\+$|All [0-9]+ tests passed|[0-9]+ of [0-9]+ tests failed' "$log")
	line=$(grep -aE '^Files=[0-9]+, Tests=[0-9]+' "$log" | tail -n 1 || true)
	if [[ $line =~ Files=([0-9]+),\ Tests=([0-9]+) ]]; then
		# prove's summary: "t/x.pl (Wstat: 256 (exited 1) Tests: 12 Failed: 1)"
		failed=$({ grep -aoE 'Tests: [0-9]+ Failed: [0-9]+\)' "$log" || true; } |
			awk '{ n += $4 } END { print n + 0 }')
		counts+=", TAP $((BASH_REMATCH[2] - failed))/${BASH_REMATCH[2]} (${BASH_REMATCH[1]} files)"
		n_passed=$((n_passed + BASH_REMATCH[2] - failed))
		n_failed=$((n_failed + failed))
	fi
	line=$(grep -aE '^cross-version dump .*: [0-9]+ passed, [0-9]+ failed' "$log" | tail -n 1 || true)
	if [[ $line =~ ([0-9]+)\ passed,\ ([0-9]+)\ failed ]]; then
		counts+=", cross-version dump ${BASH_REMATCH[1]}/$((BASH_REMATCH[1] + BASH_REMATCH[2]))"
		n_passed=$((n_passed + BASH_REMATCH[1]))
		n_failed=$((n_failed + BASH_REMATCH[2]))
	fi
	counts=${counts#, }
	[ -n "$counts" ] || counts="no test ran"
}

elapsed() { printf '%dm%02ds' $(($1 / 60)) $(($1 % 60)); }

# ---------------------------------------------------------------------------
# The suite against a PostgreSQL installed here.
run_local() {
	local m=$1 PGBIN status=0 dump_status=0 started=$SECONDS log version copt pg_packages=()
	# CFEED_PGBIN: a server built here (test/matrix/cassert.sh) instead of
	# Debian's packages (and without pg_cron: test/t/113_sqled_cron.pl skips)
	PGBIN=${CFEED_PGBIN:-/usr/lib/postgresql/$m/bin}
	[ -n "${CFEED_PGBIN:-}" ] || pg_packages=("postgresql-$m" "postgresql-server-dev-$m" libpq-dev "postgresql-$m-cron")
	export PATH="$PGBIN:$PATH"
	# The expected files were made in C.UTF-8 (UTF8 encoding, code point
	# order): the throwaway servers use it whatever this shell's locale.
	# Through LANG: pg_regress unsets LC_ALL.
	unset LC_ALL LC_COLLATE LC_CTYPE LC_MONETARY LC_NUMERIC LC_TIME LANGUAGE
	export LANG=C.UTF-8
	install_missing build-essential "${pg_packages[@]}" libipc-run-perl libfaketime pgbouncer \
		libmicrohttpd-dev libjansson-dev zlib1g-dev chromium
	install_available prometheus-sql-exporter

	# The tests run as postgres and write into the tree: work on a copy when
	# postgres cannot reach this directory (e.g. a checkout under /root).
	if ! runuser -u postgres -- test -x "$PWD" 2>/dev/null; then
		work=$(mktemp -d /tmp/cfeed-tests.XXXXXX)
		chmod 755 "$work"
		cp -a . "$work/"
		cd "$work"
		echo "run-tests.sh: running in $work (postgres cannot reach the checkout)"
	fi

	# -Wall (PGXS) and -Wextra for cfeed's own code: PostgreSQL's headers
	# count as system headers (their inline functions and macros are not
	# -Wextra clean); a callback's parameter that PostgreSQL's signature
	# imposes and cfeed does not use is marked pg_attribute_unused()
	copt="-isystem $("$PGBIN/pg_config" --includedir-server) -Wextra"
	[ "${CI:-}" = "true" ] && copt+=" -Werror"
	make clean PG_CONFIG="$PGBIN/pg_config" >/dev/null
	make with_llvm=no SERVE=yes PG_CONFIG="$PGBIN/pg_config" COPT="$copt"
	make install with_llvm=no SERVE=yes PG_CONFIG="$PGBIN/pg_config" COPT="$copt"
	version=$(pg_config --version | awk '{ print $2 }')

	if [ -n "$dump_out" ]; then
		PGBIN=$PGBIN bash test/matrix/dump.sh make "$dump_out"
	fi

	chown -R postgres: .
	log=$(mktemp /tmp/cfeed-tests-log.XXXXXX)
	runuser -u postgres -- env PATH="$PATH" PG_TEST_TIMEOUT_DEFAULT=60 PGISOLATIONTIMEOUT=60 \
		make installcheck with_llvm=no PG_CONFIG="$PGBIN/pg_config" \
		${CFEED_TEST_PORT:+CFEED_TEST_PORT="$CFEED_TEST_PORT"} "${make_args[@]}" 2>&1 |
		tee "$log" || status=$?
	if [ "$status" -ne 0 ]; then
		show_failures "$log"
	fi

	if [ -n "$dump_in" ]; then
		if [ -f "$dump_in" ]; then
			PGBIN=$PGBIN bash test/matrix/dump.sh restore "$dump_in" 2>&1 | tee -a "$log" || dump_status=$?
		else
			echo "cross-version dump: no dump to restore ($dump_in): 0 passed, 1 failed" | tee -a "$log"
			dump_status=1
		fi
	fi

	count_tests "$log"
	rm -f "$log"
	if [ "$status" -ne 0 ] || [ "$dump_status" -ne 0 ] || [ "$n_failed" -ne 0 ]; then
		echo "run-tests.sh: PostgreSQL $version: FAILED: $counts ($(elapsed $((SECONDS - started))))" >&2
		echo "tests: $n_passed passed, $((n_failed > 0 ? n_failed : 1)) failed"
		return 1
	fi
	echo "run-tests.sh: PostgreSQL $version: all tests passed: $counts ($(elapsed $((SECONDS - started))))"
	echo "tests: $n_passed passed, 0 failed"
}

# After a failed `make installcheck` (its output in $1): the diffs, the
# servers' logs, and of the TAP tests' logs only those of the failed files.
show_failures() {
	local f t
	for f in sqled/compat-run/regression.diffs sqled/compat-run/iso/output_iso/regression.diffs regression.diffs \
		output_iso/regression.diffs ranges-run/regression.diffs ranges-run/iso/regression.diffs; do
		if [ -s "$f" ]; then
			echo "===== $f"
			cat "$f"
		fi
	done
	for f in sqled/compat-run/log/*.log log/*.log output_iso/log/*.log ranges-run/log/*.log ranges-run/iso/log/*.log; do
		[ -f "$f" ] || continue
		echo "===== $f"
		tail -n 300 "$f"
	done
	for t in $(failed_tap_files "$1"); do
		for f in tmp_check/log/*"$t"*; do
			[ -f "$f" ] || continue
			echo "===== $f"
			tail -n 300 "$f"
		done
	done
	show_failed_tests "$1"
}

# The names (without .pl) of the TAP files prove reported failed in log $1.
failed_tap_files() {
	{ grep -aoE '^test/t/[0-9A-Za-z_]+\.pl +\(Wstat' "$1" || true; } |
		sed -E 's|^test/t/([0-9A-Za-z_]+)\.pl.*|\1|' | sort -u
}

# What failed, in short, from log $1: regress and isolation tests marked
# failed, prove's failed files, each failed TAP assertion with its
# diagnostics, and what a TAP file died of or bailed out on (safe_psql's
# "error running SQL" with the server's message and where it ran, a die
# in the test file), so that the summary at the end of --all shows it.
show_failed_tests() {
	echo "----- failed in $(basename "$1"):"
	{ grep -aE '^not ok|^test/t/.*(Wstat|Dubious)|^(# )?  Failed test|^#  +(at|got|expected|[A-Za-z])|^# Looks like|^error running SQL|^while running |^psql:.*(ERROR|FATAL|PANIC):|^Bail ?out|[^#].* at test/t/[^ ]+ line [0-9]+\.$' "$1" ||
		true; } | head -n 80
}

# ---------------------------------------------------------------------------
# The suite against a major this machine does not serve, in its root: a
# copy of the tree in the root's /build, and run-tests.sh run there.  Holds
# the root's lock throughout; unmounts on the way out, whatever happens.
run_in_root() {
	local m=$1 root lockfd inner=() inner_pid
	install_missing debootstrap
	root=$ROOTS/cfeed-r$m
	mkdir -p "$ROOTS"
	exec {lockfd}>"$root.lock"
	flock "$lockfd"
	trap 'bash "$ROOTSH" umount '"$m"' || true' EXIT
	trap 'exit 143' TERM
	trap 'exit 130' INT
	[ "${CFEED_FRESH_ROOTS:-}" = 1 ] && [ -z "${CFEED_ROOTS_FRESHENED:-}" ] && bash "$ROOTSH" remove "$m"
	CFEED_ROOTS=$ROOTS bash "$ROOTSH" setup "$m"

	rm -rf "$root/build"
	mkdir -p "$root/build"
	tar -C "$SRC" --exclude=./.git --exclude=./tmp_check --exclude=./tmp_regress --exclude=./tmp_iso \
		--exclude=./sqled/tmp_regress --exclude=./sqled/results --exclude=./sqled/log --exclude=./sqled/compat-run \
		--exclude=./ranges-run \
		--exclude=./results --exclude=./output_iso --exclude=./log --exclude='*.o' --exclude='*.so' \
		--exclude='*.bc' -cf - . | tar -C "$root/build" -xf -
	if [ -n "$dump_in" ]; then
		mkdir -p "$root/build/.cross-dump"
		cp "$dump_in"* "$root/build/.cross-dump/" 2>/dev/null || true
		inner+=(--dump-in "/build/.cross-dump/$(basename "$dump_in")")
	fi
	# In a session of its own, waited for in the background: a TERM or INT
	# stops the suite in the root at once, then the EXIT trap unmounts.
	setsid chroot "$root" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root CI="${CI:-}" \
		CFEED_IN_ROOT=1 ${CFEED_TEST_PORT:+CFEED_TEST_PORT="$CFEED_TEST_PORT"} \
		bash /build/test/run-tests.sh --pg "$m" "${inner[@]}" "${make_args[@]}" {lockfd}>&- &
	inner_pid=$!
	trap 'kill -TERM -- -$inner_pid 2>/dev/null; wait $inner_pid; exit 143' TERM
	trap 'kill -TERM -- -$inner_pid 2>/dev/null; wait $inner_pid; exit 130' INT
	local rc=0
	wait "$inner_pid" || rc=$?
	# whatever a failed test left running in the root's session goes too
	kill -KILL -- -"$inner_pid" 2>/dev/null || true
	return "$rc"
}

# ---------------------------------------------------------------------------
# --all: 15 here while the roots of 17 and 18 are made or checked; then 17
# and 18 (CFEED_MATRIX_JOBS at once), each restoring 15's dump.
run_matrix() {
	local logs m rc started=$SECONDS jobs=${CFEED_MATRIX_JOBS:-2} total_passed=0 total_failed=0 cassert_status=0 cassert_took=0
	local -A status took setup_pid run_pid
	local fresh_pid= fresh_status=0 packages_pid= packages_status=0
	local here t0
	here=$(local_major)
	logs=$(mktemp -d /var/tmp/cfeed-matrix.XXXXXX)
	install_missing debootstrap
	echo "run-tests.sh --all: PostgreSQL ${MAJORS[*]}; logs in $logs"

	matrix_cleanup() {
		local p
		for p in "${setup_pid[@]}" "${run_pid[@]}" $fresh_pid $packages_pid; do
			kill "$p" 2>/dev/null || true
		done
		wait 2>/dev/null || true
	}
	trap matrix_cleanup EXIT
	trap 'exit 143' TERM
	trap 'exit 130' INT

	# Make (or check) the roots in the background, each under its lock.
	for m in "${MAJORS[@]}"; do
		[ "$m" = "$here" ] && continue
		(
			exec 9>"$ROOTS/cfeed-r$m.lock"
			flock 9
			trap 'bash "$ROOTSH" umount '"$m"' || true' EXIT
			trap 'exit 143' TERM
			[ "${CFEED_FRESH_ROOTS:-}" = 1 ] && bash "$ROOTSH" remove "$m"
			bash "$ROOTSH" setup "$m"
		) >"$logs/setup-$m.log" 2>&1 &
		setup_pid[$m]=$!
	done
	export CFEED_ROOTS_FRESHENED=1

	# The README's first command in a fresh Debian 12 root, meanwhile.
	CFEED_ROOTS=$ROOTS bash "$SRC/test/matrix/fresh.sh" >"$logs/test-fresh.log" 2>&1 &
	fresh_pid=$!

	# The local major first (it makes the dump), streamed; alone on the
	# machine's cores (but for the roots' setup), it runs two TAP files at
	# once (17 minutes of TAP files became 9).
	echo "===== PostgreSQL $here (this machine)"
	m=$here
	rc=0
	t0=$SECONDS
	bash "$SRC/test/run-tests.sh" --pg "$m" --dump-out "$logs/dump$m.sql" CFEED_PROVE_JOBS=2 "${make_args[@]}" 2>&1 |
		tee "$logs/test-$m.log" || rc=$?
	status[$m]=$rc
	took[$m]=$((SECONDS - t0))

	# The Debian packages, meanwhile: 15's in a root of its own at once, 17's
	# and 18's in theirs as their suites end (packages.sh takes each root's
	# lock).
	CFEED_ROOTS=$ROOTS bash "$SRC/test/matrix/packages.sh" "${MAJORS[@]}" >"$logs/test-packages.log" 2>&1 &
	packages_pid=$!

	# The roots: at most $jobs at once, each into its log; printed when done.
	local queue=() t0 m2
	local -A t_start
	for m in "${MAJORS[@]}"; do
		[ "$m" = "$here" ] && continue
		rc=0
		wait "${setup_pid[$m]}" || rc=$?
		unset "setup_pid[$m]"
		if [ "$rc" -ne 0 ]; then
			{
				echo "run-tests.sh: the root of PostgreSQL $m could not be made:"
				cat "$logs/setup-$m.log"
			} | tee "$logs/test-$m.log"
			status[$m]=$rc
			took[$m]=0
		else
			queue+=("$m")
		fi
	done
	if [ "$jobs" -le 1 ]; then
		for m in "${queue[@]}"; do
			echo "===== PostgreSQL $m (root $ROOTS/cfeed-r$m)"
			t0=$SECONDS
			rc=0
			bash "$SRC/test/run-tests.sh" --pg "$m" --dump-in "$logs/dump$here.sql" "${make_args[@]}" 2>&1 |
				tee "$logs/test-$m.log" || rc=$?
			status[$m]=$rc
			took[$m]=$((SECONDS - t0))
		done
	elif [ "${#queue[@]}" -gt 0 ]; then
		echo "===== PostgreSQL ${queue[*]}: running at once in their roots (logs $logs/test-*.log)"
		for m in "${queue[@]}"; do
			t_start[$m]=$SECONDS
			bash "$SRC/test/run-tests.sh" --pg "$m" --dump-in "$logs/dump$here.sql" "${make_args[@]}" \
				>"$logs/test-$m.log" 2>&1 &
			run_pid[$m]=$!
		done
		# print each log as its run ends, in the order they end
		while [ "${#run_pid[@]}" -gt 0 ]; do
			rc=0
			wait -n -p m2 "${run_pid[@]}" || rc=$?
			for m in "${!run_pid[@]}"; do
				[ "${run_pid[$m]}" = "$m2" ] || continue
				unset "run_pid[$m]"
				status[$m]=$rc
				took[$m]=$((SECONDS - t_start[$m]))
				echo "===== PostgreSQL $m (root $ROOTS/cfeed-r$m), $(elapsed "${took[$m]}")"
				cat "$logs/test-$m.log"
			done
		done
	fi

	# The suite against an assert-enabled PostgreSQL 17 last, once the
	# fresh-root demo and the packages are done too, alone (its server's
	# build takes both cores), two TAP files at once (its tests wait for
	# what they expect, not a fixed time, as a slower server needs):
	# without the slow TAP tests, which every other major runs.
	wait "$fresh_pid" || fresh_status=$?
	fresh_pid=
	wait "$packages_pid" || packages_status=$?
	packages_pid=
	echo "===== PostgreSQL 17 with assertions (test/matrix/cassert.sh CFEED_QUICK=1)"
	t0=$SECONDS
	rc=0
	CFEED_ROOTS=$ROOTS bash "$SRC/test/matrix/cassert.sh" CFEED_QUICK=1 CFEED_PROVE_JOBS=2 "${make_args[@]}" \
		>"$logs/test-cassert.log" 2>&1 || rc=$?
	cassert_status=$rc
	cassert_took=$((SECONDS - t0))
	tail -n 5 "$logs/test-cassert.log"

	echo
	echo "===== run-tests.sh --all: summary ($(elapsed $((SECONDS - started))) in all)"
	local failed_majors=()
	for m in "${MAJORS[@]}"; do
		count_tests "$logs/test-$m.log"
		if [ "${status[$m]}" -eq 0 ] && [ "$n_failed" -eq 0 ]; then
			printf 'PostgreSQL %s: passed  %s (%s)\n' "$m" "$counts" "$(elapsed "${took[$m]}")"
		else
			printf 'PostgreSQL %s: FAILED  %s (%s)\n' "$m" "$counts" "$(elapsed "${took[$m]}")"
			show_failed_tests "$logs/test-$m.log" >>"$logs/failed-list"
			failed_majors+=("$m")
			[ "$n_failed" -gt 0 ] || n_failed=1
		fi
		total_passed=$((total_passed + n_passed))
		total_failed=$((total_failed + n_failed))
	done
	echo "===== the README's first command in a fresh Debian 12 root (test/matrix/fresh.sh)"
	cat "$logs/test-fresh.log"
	if [ "$fresh_status" -eq 0 ]; then
		total_passed=$((total_passed + 1))
	else
		failed_majors+=("fresh-root demo")
		total_failed=$((total_failed + 1))
	fi
	echo "===== the Debian packages, built, installed into fresh roots, smoke-tested (test/matrix/packages.sh)"
	cat "$logs/test-packages.log"
	local line pk_passed=0 pk_failed=0
	line=$(grep -aE '^packages: [0-9]+ passed, [0-9]+ failed' "$logs/test-packages.log" | tail -n 1 || true)
	if [[ $line =~ ([0-9]+)\ passed,\ ([0-9]+)\ failed ]]; then
		pk_passed=${BASH_REMATCH[1]}
		pk_failed=${BASH_REMATCH[2]}
	fi
	total_passed=$((total_passed + pk_passed))
	if [ "$packages_status" -ne 0 ] || [ "$pk_failed" -gt 0 ]; then
		failed_majors+=("Debian packages")
		total_failed=$((total_failed + (pk_failed > 0 ? pk_failed : 1)))
	fi
	# cassert.sh's own count: its tests plus each failed Assert, leak or crash
	local ca_passed=0 ca_failed=0
	line=$(grep -aE '^tests: [0-9]+ passed, [0-9]+ failed' "$logs/test-cassert.log" | tail -n 1 || true)
	if [[ $line =~ ([0-9]+)\ passed,\ ([0-9]+)\ failed ]]; then
		ca_passed=${BASH_REMATCH[1]}
		ca_failed=${BASH_REMATCH[2]}
	fi
	if [ "$cassert_status" -eq 0 ] && [ "$ca_failed" -eq 0 ]; then
		printf 'PostgreSQL 17 with assertions: passed  %s tests (%s)\n' "$ca_passed" "$(elapsed "$cassert_took")"
	else
		printf 'PostgreSQL 17 with assertions: FAILED  %s passed, %s failed (%s)\n' \
			"$ca_passed" "$ca_failed" "$(elapsed "$cassert_took")"
		show_failed_tests "$logs/test-cassert.log"
		grep -aA12 '^===== failed Assert, leak or crash' "$logs/test-cassert.log" | head -n 80 || true
		[ "$ca_passed" -gt 0 ] || tail -n 30 "$logs/test-cassert.log"
		failed_majors+=("17 with assertions")
		[ "$ca_failed" -gt 0 ] || ca_failed=1
	fi
	total_passed=$((total_passed + ca_passed))
	total_failed=$((total_failed + ca_failed))
	trap - EXIT
	if [ "${#failed_majors[@]}" -gt 0 ]; then
		# what failed, last: a CI that keeps only the output's tail shows it
		[ ! -f "$logs/failed-list" ] || cat "$logs/failed-list"
		echo "run-tests.sh --all: FAILED on PostgreSQL ${failed_majors[*]}" >&2
		echo "tests: $total_passed passed, $total_failed failed"
		return 1
	fi
	echo "tests: $total_passed passed, 0 failed"
}

if $cassert; then
	if [ -n "$major" ] || $all; then usage; fi
	exec bash "$SRC/test/matrix/cassert.sh" "${make_args[@]}"
fi
if $all; then
	[ -z "$major" ] || usage
	run_matrix
	exit
fi
[ -n "$major" ] || major=$(local_major)
case " ${MAJORS[*]} " in
	*" $major "*) ;;
	*) echo "run-tests.sh: PostgreSQL $major is not built here (15, 17 and 18 are)" >&2; exit 2 ;;
esac
if [ -n "${CFEED_IN_ROOT:-}" ] || { ! $in_root && { [ -x "/usr/lib/postgresql/$major/bin/pg_config" ] ||
	[ "$major" = "$(local_major)" ]; }; }; then
	run_local "$major"
else
	run_in_root "$major"
fi
