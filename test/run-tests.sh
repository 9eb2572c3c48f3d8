#!/bin/bash
# test/run-tests.sh: build, install and run every test suite of cfeed
# (pg_regress, isolation, TAP) against the installed PostgreSQL 15.
#
# Run as root from anywhere:  bash test/run-tests.sh
# Builds and installs as root, then runs the tests as the postgres user
# (initdb refuses root).  CI=true adds -Werror to the build.  Extra
# arguments are passed to `make installcheck` (e.g. PROVE_TESTS=...).
# Exits non-zero on any failure, after printing the diffs and logs.

set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
PGBIN=/usr/lib/postgresql/15/bin
export PATH="$PGBIN:$PATH"

if [ "$(id -u)" -ne 0 ]; then
	echo "run-tests.sh: run as root (it installs the extension and runs the tests as postgres)" >&2
	exit 2
fi

# Install what is missing (a fresh Debian 12); .ci/run installs it all.
PACKAGES=(build-essential postgresql-15 postgresql-server-dev-15 libipc-run-perl libpq-dev)
missing=()
for p in "${PACKAGES[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
	export DEBIAN_FRONTEND=noninteractive
	apt-get update
	apt-get install -y --no-install-recommends "${missing[@]}"
fi

# The tests run as postgres and write into the tree: work on a copy when
# postgres cannot reach this directory (e.g. a checkout under /root).
if ! runuser -u postgres -- test -x "$PWD" 2>/dev/null; then
	work=$(mktemp -d /tmp/cfeed-tests.XXXXXX)
	chmod 755 "$work"
	cp -a . "$work/"
	cd "$work"
	echo "run-tests.sh: running in $work (postgres cannot reach the checkout)"
fi

copt=()
if [ "${CI:-}" = "true" ]; then
	copt=(COPT=-Werror)
fi

make with_llvm=no "${copt[@]}"
make install with_llvm=no "${copt[@]}"

chown -R postgres: .

show_failures() {
	local f
	for f in regression.diffs output_iso/regression.diffs; do
		if [ -s "$f" ]; then
			echo "===== $f"
			cat "$f"
		fi
	done
	for f in log/*.log output_iso/log/*.log tmp_check/log/*; do
		[ -f "$f" ] || continue
		echo "===== $f"
		tail -n 300 "$f"
	done
}

status=0
runuser -u postgres -- env PATH="$PATH" PG_TEST_TIMEOUT_DEFAULT=60 PGISOLATIONTIMEOUT=60 \
	make installcheck with_llvm=no "$@" || status=$?

if [ "$status" -ne 0 ]; then
	show_failures
	echo "run-tests.sh: FAILED (make installcheck exited $status)" >&2
	exit "$status"
fi
echo "run-tests.sh: all tests passed"
