# test/matrix/common.sh: helpers of the scripts under test/matrix, sourced
# by them (not run): mount points, the Debian mirror, a fresh minbase root
# as a new user's machine, and a copy of the checkout as a clone has it.

# The mount points at or below $1, deepest first.
mounts_under() {
	awk -v r="$1" '$5 == r || index($5, r "/") == 1 { print $5 }' /proc/self/mountinfo | sort -r
}

# The Debian mirror this machine uses.
debian_mirror() {
	local mirror
	mirror=$(awk '/^URIs:/ { print $2; exit }' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
	[ -n "$mirror" ] || mirror=$(awk '/^deb / { print $2; exit }' /etc/apt/sources.list 2>/dev/null || true)
	echo "${mirror:-http://deb.debian.org/debian}"
}

# Copy the checkout $1 into directory $2 as a user's clone has it: the
# tracked files only (without git: the tree less build and test output).
copy_checkout() {
	local src=$1 dest=$2 files
	mkdir -p "$dest"
	if files=$(cd "$src" && git -c safe.directory='*' ls-files -z 2>/dev/null | tr '\0' '\n') &&
		[ -n "$files" ]; then
		(cd "$src" && printf '%s\n' "$files" | tar -T - -cf -) | tar -C "$dest" -xf -
	else
		tar -C "$src" --exclude=./.git --exclude=./tmp_check --exclude=./tmp_regress --exclude=./tmp_iso \
			--exclude=./results --exclude=./output_iso --exclude=./log --exclude='*.o' --exclude='*.so' \
			--exclude='*.bc' --exclude=./src/client/cfeed --exclude=./src/serve/libcfeedserve.a -cf - . | tar -C "$dest" -xf -
	fi
}

# Unmount everything under root $1 and delete it.
remove_fresh_root() {
	local root=$1 m
	for m in $(mounts_under "$root"); do
		umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
	done
	[ -z "$(mounts_under "$root")" ] && rm -rf --one-file-system "$root"
}

# A fresh Debian root at $1 of suite $2: debootstrap minbase with nothing
# else installed, plus a machine's basics that debootstrap leaves to the
# installer (name resolution, no service starting inside the root), and
# proc, dev, a /dev/shm of its own and sys mounted.  Its log goes to $1.log,
# kept only on failure.
make_fresh_root() {
	local root=$1 suite=$2
	remove_fresh_root "$root"
	mkdir -p "$(dirname "$root")"
	if ! debootstrap --variant=minbase "$suite" "$root" "$(debian_mirror)" >"$root.log" 2>&1; then
		tail -n 40 "$root.log"
		return 1
	fi
	rm -f "$root.log"
	cp /etc/resolv.conf "$root/etc/resolv.conf"
	printf '#!/bin/sh\nexit 101\n' >"$root/usr/sbin/policy-rc.d"
	chmod 755 "$root/usr/sbin/policy-rc.d"
	# sid's Release files can be past their Valid-Until on a snapshot mirror
	echo 'Acquire::Check-Valid-Until "false";' >"$root/etc/apt/apt.conf.d/99cfeed"
	mount -t proc proc "$root/proc"
	mount --rbind /dev "$root/dev" && mount --make-rslave "$root/dev"
	mount -t tmpfs -o size=1g,mode=1777 tmpfs "$root/dev/shm"
	mount --rbind /sys "$root/sys" && mount --make-rslave "$root/sys"
}
