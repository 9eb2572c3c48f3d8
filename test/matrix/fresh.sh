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

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SRC=$(cd "$HERE/../.." && pwd)
ROOTS=${CFEED_ROOTS:-/var/tmp}
root=$ROOTS/cfeed-fresh
# shellcheck source=test/matrix/common.sh
. "$HERE/common.sh"

trap 'remove_fresh_root "$root"' EXIT
echo "fresh.sh: debootstrap bookworm into $root"
if ! make_fresh_root "$root" bookworm; then
	echo "fresh-root demo: failed (debootstrap)"
	exit 1
fi
# the checkout, as a user's clone has it: tracked files only
copy_checkout "$SRC" "$root/root/cfeed"

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
