#!/bin/bash
# test/matrix/fresh.sh: the README's first command, exactly as printed
# (`bash demo.sh` from the checkout, as root), in a fresh Debian 12 root:
# debootstrap minbase with nothing else installed, as a new user's machine.
# What demo.sh needs it must install itself.
#
#   bash test/matrix/fresh.sh            make the root, run the demo, remove it
#
# The root is $CFEED_ROOTS/cfeed-fresh (default /var/tmp), made anew each
# time.  Prints the demo's output; exits with its status ("fresh-root demo:
# passed" or "failed" as the last line).  Run as root.

set -euo pipefail

SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
ROOTS=${CFEED_ROOTS:-/var/tmp}
root=$ROOTS/cfeed-fresh

mounts_under() {
	awk -v r="$1" '$5 == r || index($5, r "/") == 1 { print $5 }' /proc/self/mountinfo | sort -r
}
cleanup() {
	local m
	for m in $(mounts_under "$root"); do
		umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
	done
	[ -z "$(mounts_under "$root")" ] && rm -rf --one-file-system "$root"
}
trap cleanup EXIT

cleanup
mkdir -p "$ROOTS"
mirror=$(awk '/^URIs:/ { print $2; exit }' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
[ -n "$mirror" ] || mirror=http://deb.debian.org/debian
echo "fresh.sh: debootstrap bookworm into $root"
if ! debootstrap --variant=minbase bookworm "$root" "$mirror" >"$ROOTS/cfeed-fresh.log" 2>&1; then
	tail -n 40 "$ROOTS/cfeed-fresh.log"
	echo "fresh-root demo: failed (debootstrap)"
	exit 1
fi
rm -f "$ROOTS/cfeed-fresh.log"
# a machine's basics that debootstrap leaves to the installer: name
# resolution, and no service starting inside the root
cp /etc/resolv.conf "$root/etc/resolv.conf"
printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
chmod 755 "$root/usr/sbin/policy-rc.d"
mount -t proc proc "$root/proc"
mount --rbind /dev "$root/dev" && mount --make-rslave "$root/dev"
mount -t tmpfs -o size=1g,mode=1777 tmpfs "$root/dev/shm"
mount --rbind /sys "$root/sys" && mount --make-rslave "$root/sys"

# the checkout, as a user's clone has it: tracked files only
mkdir -p "$root/root/cfeed"
if files=$(cd "$SRC" && git -c safe.directory='*' ls-files -z 2>/dev/null | tr '\0' '\n') && [ -n "$files" ]; then
	(cd "$SRC" && printf '%s\n' "$files" | tar -T - -cf -) | tar -C "$root/root/cfeed" -xf -
else
	tar -C "$SRC" --exclude=./.git --exclude=./tmp_check --exclude=./tmp_regress --exclude=./tmp_iso \
		--exclude=./results --exclude=./output_iso --exclude=./log --exclude='*.o' --exclude='*.so' \
		--exclude='*.bc' --exclude=./src/client/cfeed -cf - . | tar -C "$root/root/cfeed" -xf -
fi

started=$SECONDS
rc=0
chroot "$root" env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root \
	LANG=C.UTF-8 bash -c 'cd /root/cfeed && bash demo.sh' || rc=$?
# the command is on the PATH afterwards, as the docs use it
if [ "$rc" -eq 0 ] && ! chroot "$root" env -i PATH=/usr/local/bin:/usr/bin:/bin cfeed --version; then
	echo "fresh.sh: cfeed is not on the PATH after demo.sh"
	rc=1
fi
if [ "$rc" -eq 0 ]; then
	echo "fresh-root demo: passed ($((SECONDS - started)) s)"
else
	echo "fresh-root demo: failed (exit $rc)"
fi
exit "$rc"
