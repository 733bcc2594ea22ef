#!/bin/sh
# haproxy-trixie.sh makes a Debian trixie root holding trixie's HAProxy
# package (3.0), so that test/integration can run its whole suite against
# HAProxy 3.0 as well as against the host's bookworm 2.6. The root lives in
# a cache directory outside the repository:
#
#   ${HAPSUPER_TRIXIE_ROOT:-/var/cache/hapsuper/trixie-haproxy}
#
# and is made with
#
#   debootstrap --variant=minbase --include=haproxy trixie <dir> <mirror>
#
# where <mirror> is the Debian mirror apt already uses on this machine (read
# from /etc/apt/sources.list and /etc/apt/sources.list.d/*.list or
# deb822 *.sources; no host is written here). debootstrap is installed from
# apt when missing.
#
# Idempotent: when <dir>/usr/sbin/haproxy exists and runs, nothing is done.
# The root is built in a temporary directory beside <dir> and renamed on
# success, so an interrupted run leaves no half-made root (a stale temporary
# directory of a killed run is removed by the next run). Needs root. Takes
# about 30 s and 230 MB. The last line printed is HAProxy's version line.
set -eu

root=${HAPSUPER_TRIXIE_ROOT:-/var/cache/hapsuper/trixie-haproxy}

version() { chroot "$root" /usr/sbin/haproxy -v 2>/dev/null | sed -n 1p; }

if [ -x "$root/usr/sbin/haproxy" ] && v=$(version) && [ -n "$v" ]; then
	echo "cached: $root"
	echo "$v"
	exit 0
fi

if [ "$(id -u)" != 0 ]; then
	echo "haproxy-trixie.sh: debootstrap and chroot need root; run it as root (CI does)" >&2
	exit 1
fi

if ! command -v debootstrap >/dev/null 2>&1; then
	echo "installing debootstrap"
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null ||
		{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null; }
fi

mirror=$(sh "$(dirname "$0")/debian-mirror.sh")
if [ -z "$mirror" ]; then
	echo "haproxy-trixie.sh: found no Debian mirror in /etc/apt/sources.list or /etc/apt/sources.list.d/ (need a 'deb' source for a Debian release such as bookworm)" >&2
	exit 1
fi

parent=$(dirname "$root")
mkdir -p "$parent"
# remove_tree deletes a (temporary) root, first unmounting what debootstrap
# may have left mounted in it (proc, sys when it was killed), and never
# descending into another file system.
remove_tree() {
	[ -d "$1" ] || return 0
	grep -F " $1/" /proc/self/mountinfo | awk '{print $5}' | sort -r | while read -r m; do
		umount -l "$m" || true
	done
	rm -rf --one-file-system "$1"
}
# A previous run that was killed leaves its temporary root: remove it.
for stale in "$parent"/.$(basename "$root").tmp.*; do
	[ -d "$stale" ] || continue
	echo "removing $stale (left by an interrupted run)"
	remove_tree "$stale"
done
tmp="$parent/.$(basename "$root").tmp.$$"
trap 'remove_tree "$tmp"' EXIT
trap 'remove_tree "$tmp"; exit 130' INT TERM

start=$(date +%s)
echo "debootstrap trixie with haproxy from $mirror into $root"
if ! debootstrap --variant=minbase --include=haproxy trixie "$tmp" "$mirror" >"$parent/debootstrap.log" 2>&1; then
	tail -20 "$parent/debootstrap.log" >&2
	echo "haproxy-trixie.sh: debootstrap failed; full log: $parent/debootstrap.log" >&2
	exit 1
fi
chroot "$tmp" /usr/sbin/haproxy -v >/dev/null
# A previous root that no longer runs is replaced.
remove_tree "$root"
mv "$tmp" "$root"
trap - EXIT INT TERM
echo "built in $(($(date +%s) - start))s, $(du -sh "$root" | cut -f1)"
version
