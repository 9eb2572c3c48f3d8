#!/bin/bash
# test/matrix/packages.sh: cfeed's Debian packages (debian/), built as
# PostgreSQL's Debian packaging builds extensions, installed into a root
# where nothing was built, and a smoke test there.
#
#   bash test/matrix/packages.sh [MAJOR ...]      default: 15 17 18
#
# For each MAJOR, all at once: a fresh root of its Debian suite (bookworm
# for 15, trixie for 17, sid for 18: debootstrap minbase,
# $CFEED_ROOTS/cfeed-pkgtest-MAJOR, removed afterwards) is made, meanwhile
# in the major's root (test/matrix/root.sh; made or reused, held under the
# root's lock: a suite running there goes first) the packaging tools are
# installed, the checkout is copied as a clone has it, and `pg_buildext
# updatecontrol` and `dpkg-buildpackage -us -uc -b` build the packages, to
# $CFEED_ROOTS/cfeed-debs/MAJOR.  The fresh root gets them with `apt-get
# install ./*.deb` and runs the smoke test: a server with shared_preload_libraries = 'cfeed', CREATE EXTENSION,
# a feed, a write, `cfeed tail` (on the PATH) reading it once stamped,
# `cfeed serve` answering a FeedAPI discovery call.  Prints the packages
# with their sizes; the last line is "packages: N passed, N failed" (one
# per major).  Run as root.

set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SRC=$(cd "$HERE/../.." && pwd)
ROOTS=${CFEED_ROOTS:-/var/tmp}
export CFEED_ROOTS=$ROOTS
# shellcheck source=test/matrix/common.sh
. "$HERE/common.sh"

VERSION=$(dpkg-parsechangelog -l "$SRC/debian/changelog" -SVersion 2>/dev/null ||
	sed -n '1s/^[^(]*(\([^)]*\)).*/\1/p' "$SRC/debian/changelog")
UPSTREAM=${VERSION%-*}

# Build the packages of major $1 in its root, into $ROOTS/cfeed-debs/$1.
build() {
	local m=$1 root lockfd rc=0
	root=$(bash "$HERE/root.sh" path "$m")
	exec {lockfd}>"$root.lock"
	flock "$lockfd"
	bash "$HERE/root.sh" setup "$m" || rc=$?
	if [ "$rc" -eq 0 ]; then
		rm -rf "$root/pkg"
		copy_checkout "$SRC" "$root/pkg/cfeed-$UPSTREAM"
		chroot "$root" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 \
			DEBIAN_FRONTEND=noninteractive bash -c "
			set -e
			apt-get install -y -q --no-install-recommends debhelper postgresql-server-dev-all >/dev/null ||
				{ apt-get -q update >/dev/null && apt-get install -y -q --no-install-recommends debhelper postgresql-server-dev-all >/dev/null; }
			cd /pkg/cfeed-$UPSTREAM
			pg_buildext updatecontrol
			apt-get build-dep -y -q --no-install-recommends ./ >/dev/null
			dpkg-buildpackage -us -uc -b
		" || rc=$?
	fi
	if [ "$rc" -eq 0 ]; then
		rm -rf "$ROOTS/cfeed-debs/$m"
		mkdir -p "$ROOTS/cfeed-debs/$m"
		cp "$root"/pkg/*.deb "$ROOTS/cfeed-debs/$m/"
		rm -rf "$root/pkg"
	fi
	bash "$HERE/root.sh" umount "$m" || true
	exec {lockfd}>&-
	return "$rc"
}

# The smoke test, run in the fresh root as root: $1 is the major, $2 a free
# TCP port for the gateway (the root shares this machine's network).
SMOKE=$(cat <<'SMOKE'
set -euo pipefail
m=$1
port=$2
export DEBIAN_FRONTEND=noninteractive
mkdir -p /etc/postgresql-common
echo 'create_main_cluster = false' >/etc/postgresql-common/createcluster.conf
apt-get -q update >/dev/null
# the packages but the debug symbols, and curl for the discovery call
apt-get install -y -q --no-install-recommends $(ls /debs/*.deb | grep -v -- -dbgsym_) curl >/dev/null
echo "smoke: installed: $(dpkg-query -W -f='${Package} ${Version}\n' 'postgresql-*-cfeed' cfeed | paste -sd ' ')"
echo "smoke: cfeed on the PATH: $(command -v cfeed) ($(cfeed --version))"
if ldd "/usr/lib/postgresql/$m/lib/cfeed.so" | grep -q microhttpd; then
	echo "smoke: the extension links libmicrohttpd" >&2
	exit 1
fi

dir=$(mktemp -d /tmp/smoke.XXXXXX)
chown postgres: "$dir"
as_pg() { (cd / && runuser -u postgres -- "$@"); }
sql() { as_pg psql -X -q -At -v ON_ERROR_STOP=1 -h "$dir" -p 5432 -d postgres -c "$1"; }
gw=
trap 'kill $gw 2>/dev/null || true; as_pg /usr/lib/postgresql/'"$m"'/bin/pg_ctl -D "$dir/data" -m immediate stop >/dev/null 2>&1 || true' EXIT
as_pg "/usr/lib/postgresql/$m/bin/initdb" -D "$dir/data" -A trust -U postgres >/dev/null
cat >>"$dir/data/postgresql.conf" <<CONF
shared_preload_libraries = 'cfeed'
listen_addresses = ''
unix_socket_directories = '$dir'
port = 5432
CONF
as_pg "/usr/lib/postgresql/$m/bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w start >/dev/null
sql 'CREATE EXTENSION cfeed'
sql "SELECT cfeed.create_feed('orders', 2)" >/dev/null
sql 'SELECT cfeed.publish(1, 1)' >/dev/null
echo "smoke: PostgreSQL $m with cfeed $(sql "SELECT extversion FROM pg_extension WHERE extname = 'cfeed'"), a feed and a write"

# the sweeper stamps it; cfeed tail reads it
for _ in $(seq 100); do
	[ "$(sql 'SELECT cfeed.head(1, 1)')" = 2000000000000001 ] && break
	sleep 0.1
done
out=$(as_pg cfeed tail -h "$dir" -p 5432 -U postgres -d postgres --feed orders --max 1 --idle-exit-ms 10000)
echo "smoke: cfeed tail: $out"
case "$out" in
	*2000000000000001*) ;;
	*) echo "smoke: cfeed tail did not read the change" >&2; exit 1 ;;
esac

# cfeed serve answers a FeedAPI discovery call
echo 'smoke-token-0123456789 orders smoke' >"$dir/tokens"
chown postgres: "$dir/tokens"
chmod 600 "$dir/tokens"
runuser -u postgres -- cfeed serve --dbname "host=$dir port=5432 dbname=postgres" --tokens "$dir/tokens" \
	--listen 127.0.0.1 --port "$port" 2>"$dir/serve.log" &
gw=$!
for _ in $(seq 100); do
	curl -fsS "http://127.0.0.1:$port/healthz" >/dev/null 2>&1 && break
	sleep 0.1
done
body=$(curl -fsS -H 'Authorization: Bearer smoke-token-0123456789' "http://127.0.0.1:$port/feeds/orders") || {
	cat "$dir/serve.log" >&2
	exit 1
}
echo "smoke: cfeed serve: GET /feeds/orders: $body"
case "$body" in
	*'"partitions"'*) ;;
	*) echo "smoke: no partitions in the discovery answer" >&2; exit 1 ;;
esac
SMOKE
)

# Major $1: its fresh root (in the background) and its packages, then the
# packages into the fresh root and the smoke test there.  Prints what it
# did; the last line says whether it passed.
one_major() {
	local m=$1 suite root rc=0 started=$SECONDS
	suite=$(bash "$HERE/root.sh" suite "$m")
	root=$ROOTS/cfeed-pkgtest-$m
	fresh_pid=
	trap 'kill $fresh_pid 2>/dev/null || true; wait || true; remove_fresh_root "$root" || true' EXIT
	make_fresh_root "$root" "$suite" >"$root.make.log" 2>&1 &
	fresh_pid=$!
	if build "$m" >"$ROOTS/cfeed-debs-$m.log" 2>&1; then
		echo "packages.sh: PostgreSQL $m: built in the $suite root ($((SECONDS - started)) s):"
		(cd "$ROOTS/cfeed-debs/$m" && ls -l ./*.deb | awk '{ printf "  %-48s %9d bytes\n", substr($9, 3), $5 }')
		rm -f "$ROOTS/cfeed-debs-$m.log"
	else
		tail -n 60 "$ROOTS/cfeed-debs-$m.log"
		echo "packages.sh: PostgreSQL $m: the build failed (log $ROOTS/cfeed-debs-$m.log)"
		return 1
	fi
	wait "$fresh_pid" || rc=$?
	if [ "$rc" -ne 0 ]; then
		cat "$root.make.log"
		echo "packages.sh: PostgreSQL $m: no fresh $suite root (debootstrap failed)"
		return 1
	fi
	rm -f "$root.make.log"
	echo "packages.sh: installing them into a fresh $suite root (debootstrap minbase) for the smoke test"
	mkdir -p "$root/debs"
	cp "$ROOTS/cfeed-debs/$m"/*.deb "$root/debs/"
	chroot "$root" env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root \
		LANG=C.UTF-8 bash -c "$SMOKE" smoke "$m" "$(perl "$HERE/../free-port.pl")" || rc=$?
	if [ "$rc" -eq 0 ]; then
		echo "packages.sh: PostgreSQL $m: built, installed and smoke-tested ($((SECONDS - started)) s)"
	else
		echo "packages.sh: PostgreSQL $m: the smoke test failed"
	fi
	return "$rc"
}

if [ "$(id -u)" -ne 0 ]; then
	echo "packages.sh: run as root" >&2
	exit 2
fi
majors=("$@")
[ "${#majors[@]}" -gt 0 ] || majors=(15 17 18)
mkdir -p "$ROOTS"
declare -A pid
for m in "${majors[@]}"; do
	one_major "$m" >"$ROOTS/cfeed-packages-$m.log" 2>&1 &
	pid[$m]=$!
done
trap 'kill "${pid[@]}" 2>/dev/null || true' EXIT
passed=0
failed=0
for m in "${majors[@]}"; do
	rc=0
	wait "${pid[$m]}" || rc=$?
	echo "===== Debian packages for PostgreSQL $m"
	cat "$ROOTS/cfeed-packages-$m.log"
	rm -f "$ROOTS/cfeed-packages-$m.log"
	if [ "$rc" -eq 0 ]; then
		passed=$((passed + 1))
	else
		failed=$((failed + 1))
	fi
done
trap - EXIT
echo "packages: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
