#!/usr/bin/env bash
# A private PostgreSQL for the benchmarks, so that they need not install
# cfeed and the peers into the machine's PostgreSQL (which others may
# share).  PREFIX gets a copy of the binaries, libraries, shared files and
# headers of the PostgreSQL whose pg_config comes first in PATH, at the
# same paths below PREFIX (PostgreSQL finds its library and share
# directories relative to its binaries, so the copy uses its own); the
# peers' Debian packages (PgQ, wal2json) unpacked into it (apt-get
# download: the machine's packages are left alone; PREFIX/peers lists
# their versions); and this tree's cfeed, built (with its `cfeed` command,
# which serve.sh runs from the tree) and installed into the copy (make
# install DESTDIR=PREFIX).  PREFIX/bin links to the copy's bin.  The bench
# scripts use it when BENCH_PREFIX=PREFIX (lib.sh); run-all.sh runs this
# script first.  The copy is made once, cfeed installed anew at every run
# (the tree may have changed).  Run as root.
# Usage: bash test/bench/prefix.sh PREFIX
set -euo pipefail
PREFIX=${1:?usage: prefix.sh PREFIX}
top=$(cd "$(dirname "$0")/../.." && pwd)
bindir=$(pg_config --bindir)
major=$(pg_config --version | sed 's/^PostgreSQL \([0-9]*\).*/\1/')
if ! [ -x "$PREFIX/bin/postgres" ]; then
	echo "prefix.sh: copying PostgreSQL $major into $PREFIX"
	mkdir -p "$PREFIX"
	chmod 755 "$PREFIX"
	for d in "$bindir" "$(pg_config --pkglibdir)" "$(pg_config --sharedir)" "$(pg_config --includedir)"; do
		mkdir -p "$PREFIX$(dirname "$d")"
		cp -a "$d" "$PREFIX$(dirname "$d")/"
	done
	# whatever cfeed the machine had installed is not the one measured
	rm -f "$PREFIX$(pg_config --sharedir)"/extension/cfeed[.-]* "$PREFIX$(pg_config --pkglibdir)/cfeed.so"
	debs=$(mktemp -d)
	if (cd "$debs" && apt-get download -q "postgresql-$major-pgq3" "postgresql-$major-wal2json") >/dev/null 2>&1; then
		for deb in "$debs"/*.deb; do
			dpkg-deb -x "$deb" "$PREFIX"
			# shellcheck disable=SC2016	# dpkg-deb's format, not the shell's
			dpkg-deb -W --showformat='${Package} ${Version}\n' "$deb" >> "$PREFIX/peers"
		done
	else
		echo "prefix.sh: the peers' packages could not be downloaded: their rows are skipped"
	fi
	rm -rf "$debs"
	ln -sfn "$PREFIX$bindir" "$PREFIX/bin"
fi
make -s -C "$top" with_llvm=no >/dev/null	# the `cfeed` command too, for serve.sh
make -s -C "$top" install with_llvm=no CLIENT=no DESTDIR="$PREFIX" >/dev/null
echo "prefix.sh: cfeed $(sed -n "s/^default_version = '\(.*\)'/\1/p" "$top/cfeed.control") installed into $PREFIX ($("$PREFIX/bin/pg_config" --version))"
