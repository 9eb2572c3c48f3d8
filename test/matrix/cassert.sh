#!/bin/bash
# test/matrix/cassert.sh: cfeed's suites (pg_regress, isolation, TAP)
# against an assert-enabled PostgreSQL 17.  Debian's packages are built
# without asserts, so this builds Debian's own source package of
# postgresql-17 (its patches applied) with --enable-cassert --enable-debug
# --enable-tap-tests, in a Debian root of its own.
#
#   bash test/matrix/cassert.sh [ARGS]    ARGS go to `make installcheck`
#                                         (CFEED_QUICK=1, PROVE_TESTS=...)
#
# The root is $CFEED_ROOTS/cfeed-cassert17 (default /var/tmp): trixie
# minbase (test/matrix/common.sh), with a deb-src line, the build
# dependencies and what the suites need.  `apt-get source postgresql-17`
# unpacks the source in the root's /usr/local/src/cassert (when the mirror
# lacks the version trixie's index names, the version CFEED_CASSERT_VERSION,
# default 17.11-0+deb13u1, is fetched from its pool and unpacked with
# dpkg-source, which checks the files' checksums); it is configured
# there, built with make -j2 (server and contrib: the TAP tests use amcheck,
# pgstattuple, pg_stat_statements, test_decoding) and installed into the
# root's /usr/local/pgsql-cassert.  The build tree and the install stay: a
# later run finds the installed version in /usr/local/pgsql-cassert/.cfeed-cassert
# and skips the build (about 5 minutes on 2 cores the first time: the root
# about 1, the build about 4.5).
# CFEED_FRESH_ROOTS=1 makes the root, and so the build, anew.
#
# Then test/run-tests.sh runs in the root on a copy of the checkout (/build)
# with that server's bindir (CFEED_PGBIN): it builds and installs cfeed
# against its pg_config (CI=true: -Werror) and runs `make installcheck` as
# the postgres user (initdb refuses root).  Afterwards every server log of
# the run is searched for "TRAP:" (a failed Assert: the server prints the
# condition, file and line, and a backtrace, then aborts), for the leaks
# the server warns of at a transaction's end and for crashes (PROBLEMS
# below); each one found
# is printed, a TRAP with its backtrace, and counted as a failed test.  The
# last line is "tests: N passed, N failed".  Run as root; holds the root's
# lock ($root.lock) throughout and unmounts on the way out.

set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SRC=$(cd "$HERE/../.." && pwd)
ROOTS=${CFEED_ROOTS:-/var/tmp}
MAJOR=17
SUITE=trixie
PREFIX=/usr/local/pgsql-cassert
# The source's version when the one trixie's index names is missing from the
# mirror (a mirror can lag its index)
FALLBACK_VERSION=${CFEED_CASSERT_VERSION:-17.11-0+deb13u1}
BUILDDIR=/usr/local/src/cassert
root=$ROOTS/cfeed-cassert$MAJOR
# shellcheck source=test/matrix/common.sh
. "$HERE/common.sh"

if [ "$(id -u)" -ne 0 ]; then
	echo "cassert.sh: run as root" >&2
	exit 2
fi

# What the build needs (bison, flex, Perl's IPC::Run for the TAP tests;
# dpkg-dev for apt-get source) and what test/run-tests.sh would install
# besides Debian's PostgreSQL packages (the gateway's libraries, pgbouncer,
# libfaketime for t/011_sweeper_clock.pl).
PACKAGES="build-essential dpkg-dev bison flex perl libipc-run-perl zlib1g-dev pkg-config \
libmicrohttpd-dev libjansson-dev pgbouncer libfaketime"

# Run a command in the root, with a clean environment.
in_root() {
	chroot "$root" env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root \
		LANG=C.UTF-8 DEBIAN_FRONTEND=noninteractive "$@"
}

# proc, dev, a /dev/shm of the root's own (PostgreSQL's dynamic shared
# memory) and sys, for a root made earlier.
mount_root() {
	mountpoint -q "$root/proc" || mount -t proc proc "$root/proc"
	if ! mountpoint -q "$root/dev"; then
		mount --rbind /dev "$root/dev" && mount --make-rslave "$root/dev"
	fi
	if [ ! -e "$root/dev/shm/.cfeed-root-shm" ]; then
		mount -t tmpfs -o size=2g,mode=1777 tmpfs "$root/dev/shm"
		touch "$root/dev/shm/.cfeed-root-shm"
	fi
	if ! mountpoint -q "$root/sys"; then
		mount --rbind /sys "$root/sys" && mount --make-rslave "$root/sys"
	fi
}

umount_root() {
	local m
	for m in $(mounts_under "$root"); do
		umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
	done
}

# The root: debootstrap unless done (.cfeed-debootstrap), then the packages
# unless installed (.cfeed-cassert-root; their log in $root.apt.log, kept on
# failure).
setup_root() {
	if [ "${CFEED_FRESH_ROOTS:-}" = 1 ] || [ "$(cat "$root/.cfeed-debootstrap" 2>/dev/null)" != "$SUITE" ]; then
		echo "cassert.sh: debootstrap $SUITE into $root"
		make_fresh_root "$root" "$SUITE"
		mkdir -p "$root/etc/apt/sources.list.d"
		echo "deb-src $(debian_mirror) $SUITE main" >"$root/etc/apt/sources.list.d/cfeed-src.list"
		echo "$SUITE" >"$root/.cfeed-debootstrap"
	else
		mount_root
	fi
	if [ "$(cat "$root/.cfeed-cassert-root" 2>/dev/null)" != "$SUITE" ]; then
		echo "cassert.sh: installing the build dependencies"
		# shellcheck disable=SC2086
		if ! in_root bash -c "
			for try in 1 2; do
				apt-get -q update && apt-get install -y -q --no-install-recommends $PACKAGES && exit 0
				sleep 5
			done
			exit 1" >"$root.apt.log" 2>&1; then
			tail -n 40 "$root.apt.log" >&2
			return 1
		fi
		rm -f "$root.apt.log"
		# the suites run as postgres, as in Debian's packages (pgbouncer's
		# dependencies make the user); Debian's patches put the default
		# socket directory in /var/run/postgresql
		in_root bash -c 'id postgres >/dev/null 2>&1 ||
			useradd --system --home-dir /var/lib/postgresql --create-home --shell /bin/bash postgres
			install -d -o postgres -g postgres -m 2775 /var/run/postgresql'
		echo "$SUITE" >"$root/.cfeed-cassert-root"
	else
		echo "cassert.sh: reusing $root"
	fi
}

# The assert-enabled server: built and installed unless the install is
# there.  Its log is $root.build.log, kept on failure.
build_server() {
	local started=$SECONDS
	if [ -f "$root$PREFIX/.cfeed-cassert" ]; then
		echo "cassert.sh: reusing $PREFIX ($(cat "$root$PREFIX/.cfeed-cassert"))"
		return 0
	fi
	echo "cassert.sh: building postgresql-$MAJOR from Debian's source package with asserts (log $root.build.log)"
	if ! in_root bash -c "
		set -ex
		rm -rf $BUILDDIR $PREFIX
		mkdir -p $BUILDDIR
		cd $BUILDDIR
		apt-get -q update
		if ! apt-get source -q postgresql-$MAJOR; then
			# the version the index names is not always on the mirror
			# yet: the pinned one, fetched from the pool by hand and
			# unpacked (checksums checked) with its patches applied
			rm -rf $BUILDDIR/*
			pool=$(debian_mirror)/pool/main/p/postgresql-$MAJOR
			/usr/lib/apt/apt-helper download-file \$pool/postgresql-${MAJOR}_$FALLBACK_VERSION.dsc \
				postgresql-${MAJOR}_$FALLBACK_VERSION.dsc
			for f in \$(awk '/^Files:/ { on = 1; next } /^[^ ]/ { on = 0 } on { print \$3 }' \
				postgresql-${MAJOR}_$FALLBACK_VERSION.dsc); do
				/usr/lib/apt/apt-helper download-file \$pool/\$f \$f
			done
			dpkg-source -x postgresql-${MAJOR}_$FALLBACK_VERSION.dsc
		fi
		cd postgresql-$MAJOR-*/
		./configure --prefix=$PREFIX --enable-cassert --enable-debug --enable-tap-tests \
			--without-icu --without-readline --with-zlib
		make -j2 -s world-bin
		make -s install-world-bin
		# the libraries of the install (libpq for the cfeed command) found by the loader
		echo $PREFIX/lib >/etc/ld.so.conf.d/pgsql-cassert.conf
		ldconfig
		$PREFIX/bin/pg_config --version >$PREFIX/.cfeed-cassert
	" >"$root.build.log" 2>&1; then
		tail -n 60 "$root.build.log" >&2
		return 1
	fi
	rm -f "$root.build.log"
	echo "cassert.sh: built $(cat "$root$PREFIX/.cfeed-cassert") in $((SECONDS - started)) s"
}

# What an assert-enabled server reports of a bug in an extension: a failed
# Assert (TRAP: the condition, file and line, then a backtrace, before the
# server aborts), and the leaks a transaction's end finds (buffer pins,
# relcache references, resources of the resource owners, hash_seq_search
# scans, parallel contexts, temporary files), which it only warns of; and
# any other crash: a PANIC, a process the postmaster saw die of SIGSEGV,
# SIGBUS, SIGILL or SIGFPE (the SIGKILLs of the crash tests are theirs; an
# Assert's SIGABRT comes after its TRAP).
PROBLEMS='TRAP: |PANIC: |was terminated by signal (4|7|8|11)[^0-9]|WARNING:  (buffer refcount leak|local buffer refcount leak|leaked hash_seq_search|leaking still-referenced|resource was not closed|leaked parallel context|[0-9]+ temporary files and directories not closed)'

# The PROBLEMS in the server logs under $1 (log/*.log: pg_regress's and
# isolation's postmaster.log, the TAP clusters' logs): each line with the 40
# after it (a TRAP's backtrace, the postmaster's report of the crash).  Sets
# n_problems.
report_problems() {
	local dir=$1 f
	n_problems=0
	while IFS= read -r -d '' f; do
		grep -aqE "$PROBLEMS" "$f" || continue
		n_problems=$((n_problems + $(grep -acE "$PROBLEMS" "$f")))
		echo "===== failed Assert, leak or crash in ${f#"$root"}"
		awk -v re="$PROBLEMS" '$0 ~ re { n = 41 } n > 0 { print; n-- }' "$f"
	done < <(find "$dir" -path '*/log/*.log' -type f -print0 2>/dev/null)
}

exec {lockfd}>"$root.lock"
flock "$lockfd"
trap umount_root EXIT
trap 'exit 143' TERM
trap 'exit 130' INT

started=$SECONDS
setup_root
build_server
built=$SECONDS

# The checkout, as test/run-tests.sh copies it into a root.
rm -rf "$root/build"
mkdir -p "$root/build"
tar -C "$SRC" --exclude=./.git --exclude=./tmp_check --exclude=./tmp_regress --exclude=./tmp_iso \
	--exclude=./results --exclude=./output_iso --exclude=./log --exclude='*.o' --exclude='*.so' \
	--exclude='*.bc' -cf - . | tar -C "$root/build" -xf -

# In a session of its own, waited for in the background: a TERM or INT
# stops the suite in the root at once, then the EXIT trap unmounts.
rc=0
log=$(mktemp /tmp/cfeed-cassert-log.XXXXXX)
setsid chroot "$root" env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root \
	CI="${CI:-}" CFEED_IN_ROOT=1 CFEED_PGBIN="$PREFIX/bin" \
	${CFEED_TEST_PORT:+CFEED_TEST_PORT="$CFEED_TEST_PORT"} \
	bash /build/test/run-tests.sh --pg "$MAJOR" "$@" {lockfd}>&- > >(tee "$log") 2>&1 &
inner_pid=$!
trap 'kill -TERM -- -$inner_pid 2>/dev/null; wait $inner_pid; exit 143' TERM
trap 'kill -TERM -- -$inner_pid 2>/dev/null; wait $inner_pid; exit 130' INT
wait "$inner_pid" || rc=$?
kill -KILL -- -"$inner_pid" 2>/dev/null || true
sleep 1

report_problems "$root/build"
line=$(grep -aE '^tests: [0-9]+ passed, [0-9]+ failed' "$log" | tail -n 1 || true)
rm -f "$log"
passed=0
failed=0
if [[ $line =~ ([0-9]+)\ passed,\ ([0-9]+)\ failed ]]; then
	passed=${BASH_REMATCH[1]}
	failed=${BASH_REMATCH[2]}
fi
[ "$rc" -eq 0 ] || [ "$failed" -gt 0 ] || failed=1
failed=$((failed + n_problems))
echo "cassert.sh: $(cat "$root$PREFIX/.cfeed-cassert"), asserts on: $n_problems failed Assert(s), leak(s) or crash(es) in the server logs;" \
	"server ready in $((built - started)) s, suites $((SECONDS - built)) s"
echo "tests: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
