#!/bin/bash
# test/matrix/root.sh: a Debian root (debootstrap) that serves another
# PostgreSQL major, for running cfeed's suite against it.
#
#   bash test/matrix/root.sh setup MAJOR    create the root (or reuse a complete
#                                           one), mount, install PostgreSQL MAJOR
#   bash test/matrix/root.sh mount MAJOR    mount proc, dev, sys, a tmpfs /dev/shm
#   bash test/matrix/root.sh umount MAJOR   unmount everything under the root
#   bash test/matrix/root.sh remove MAJOR   unmount, then delete the root
#   bash test/matrix/root.sh path MAJOR     print the root's directory
#   bash test/matrix/root.sh suite MAJOR    print the root's Debian suite
#
# Majors and suites: 15 bookworm, 17 trixie, 18 sid (Debian's archive has no
# other).  Roots live in $CFEED_ROOTS (default /var/tmp), one per major:
# /var/tmp/cfeed-r17, /var/tmp/cfeed-r18.  A root is complete when its
# .cfeed-root file names its major; an incomplete one (an interrupted
# debootstrap) is unmounted and rebuilt.  Run as root.  The caller unmounts
# (test/run-tests.sh does, from a trap).

set -euo pipefail

ROOTS=${CFEED_ROOTS:-/var/tmp}

suite_of() {
	case "$1" in
		15) echo bookworm ;;
		17) echo trixie ;;
		18) echo sid ;;
		*) echo "root.sh: no Debian suite here serves PostgreSQL $1 (15 bookworm, 17 trixie, 18 sid)" >&2
		   return 1 ;;
	esac
}

# shellcheck source=test/matrix/common.sh
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"

do_umount() {
	local root=$1 m tries
	for tries in 1 2 3; do
		for m in $(mounts_under "$root"); do
			umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
		done
		[ -z "$(mounts_under "$root")" ] && return 0
		sleep 1
	done
	echo "root.sh: still mounted under $root:" $(mounts_under "$root") >&2
	return 1
}

do_mount() {
	local root=$1
	mountpoint -q "$root/proc" || mount -t proc proc "$root/proc"
	if ! mountpoint -q "$root/dev"; then
		mount --rbind /dev "$root/dev"
		# rslave: nothing mounted in the root reaches the host's /dev
		mount --make-rslave "$root/dev"
	fi
	if ! mountpoint -q "$root/sys"; then
		mount --rbind /sys "$root/sys"
		mount --make-rslave "$root/sys"
	fi
	# a /dev/shm of the root's own (PostgreSQL's dynamic shared memory),
	# over the host's that came with /dev; the marker tells it is there
	if [ ! -e "$root/dev/shm/.cfeed-root-shm" ]; then
		mount -t tmpfs -o size=2g,mode=1777 tmpfs "$root/dev/shm"
		touch "$root/dev/shm/.cfeed-root-shm"
	fi
}

# Delete a root: only once nothing is mounted below it.
do_remove() {
	local root=$1
	[ -e "$root" ] || return 0
	do_umount "$root"
	rm -rf --one-file-system "$root"
}

do_setup() {
	local major=$1 root=$2 suite mirror
	suite=$(suite_of "$major")
	if [ "$(cat "$root/.cfeed-root" 2>/dev/null)" != "$major" ] &&
		[ "$(cat "$root/.cfeed-debootstrap" 2>/dev/null)" != "$suite" ]; then
		do_remove "$root"
		mirror=$(debian_mirror)
		echo "root.sh: debootstrap $suite into $root ($mirror)"
		mkdir -p "$ROOTS"
		# a second try after a network hiccup, from scratch
		if ! debootstrap --variant=minbase --include=ca-certificates "$suite" "$root" "$mirror" \
			>"$root.debootstrap.log" 2>&1; then
			echo "root.sh: debootstrap failed, trying once more"
			do_remove "$root"
			debootstrap --variant=minbase --include=ca-certificates "$suite" "$root" "$mirror" \
				>"$root.debootstrap.log" 2>&1 || {
				tail -n 40 "$root.debootstrap.log" >&2
				return 1
			}
		fi
		rm -f "$root.debootstrap.log"
		# No service starts inside the root, and no "main" cluster is made.
		printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
		chmod 755 "$root/usr/sbin/policy-rc.d"
		mkdir -p "$root/etc/postgresql-common"
		echo 'create_main_cluster = false' >"$root/etc/postgresql-common/createcluster.conf"
		# sid's Release files can be past their Valid-Until on a snapshot mirror
		echo 'Acquire::Check-Valid-Until "false";' >"$root/etc/apt/apt.conf.d/99cfeed"
		cp /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null || true
		echo "$suite" >"$root/.cfeed-debootstrap"
	fi
	do_mount "$root"
	packages="build-essential postgresql-$major postgresql-server-dev-$major libpq-dev libipc-run-perl libfaketime pgbouncer libmicrohttpd-dev libjansson-dev zlib1g-dev"
	# shellcheck disable=SC2086
	if [ "$(cat "$root/.cfeed-root" 2>/dev/null)" = "$major" ] &&
		chroot "$root" dpkg-query -W -f='${Status}\n' $packages 2>/dev/null |
		awk '$3 != "installed" { bad = 1 } END { exit bad }'; then
		echo "root.sh: reusing $root"
	else
		echo "root.sh: installing PostgreSQL $major in $root"
		chroot "$root" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive bash -c "
			set -e
			for try in 1 2; do
				apt-get -q update && apt-get install -y -q --no-install-recommends $packages && exit 0
				sleep 5
			done
			exit 1
		" >"$root.apt.log" 2>&1 || {
			tail -n 40 "$root.apt.log" >&2
			return 1
		}
		echo "$major" >"$root/.cfeed-root"
	fi
	echo "root.sh: $root ready ($(chroot "$root" /usr/lib/postgresql/"$major"/bin/pg_config --version))"
}

if [ "$(id -u)" -ne 0 ]; then
	echo "root.sh: run as root" >&2
	exit 2
fi
[ $# -eq 2 ] || { sed -n '2,18p' "$0" >&2; exit 2; }
cmd=$1
major=$2
suite_of "$major" >/dev/null
root=$ROOTS/cfeed-r$major

case "$cmd" in
	setup) do_setup "$major" "$root" ;;
	mount) do_mount "$root" ;;
	umount) do_umount "$root" ;;
	remove) do_remove "$root" ;;
	path) echo "$root" ;;
	suite) suite_of "$major" ;;
	*) sed -n '2,18p' "$0" >&2; exit 2 ;;
esac
