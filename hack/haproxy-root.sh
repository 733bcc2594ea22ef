#!/bin/sh
# haproxy-root.sh <version> makes a Debian root holding Debian's HAProxy
# package of that branch, so that test/integration can run its whole suite
# against it as well as against the host's bookworm 2.6, and hack/image.sh
# can make its haproxy stand-in from the Dockerfile's branch:
#
#   3.0   Debian trixie     debootstrap --variant=minbase --include=haproxy trixie
#   3.2   Debian forky      the same with forky (bookworm's debootstrap has no
#                           forky script: its sid script is passed)
#   3.4   Debian experimental   a sid root, experimental added to its
#                           sources, then apt-get -t experimental install haproxy
#
# The root lives in a cache directory outside the repository:
#
#   ${HAPSUPER_HAPROXY_ROOTS:-/var/cache/hapsuper}/haproxy-<version>
#
# The mirror is the Debian mirror apt already uses on this machine
# (hack/debian-mirror.sh; no host is written here). debootstrap is installed
# from apt when missing.
#
# Idempotent: when <dir>/usr/sbin/haproxy exists and runs and is of the
# asked branch, nothing is done. The root is built in a temporary directory
# beside <dir> and renamed on success, so an interrupted run leaves no
# half-made root (a stale temporary directory of a killed run is removed by
# the next run). Needs root. Takes 30-90 s and 230-300 MB per root. The last
# line printed is HAProxy's version line.
set -eu

want=${1-}
case "$want" in
3.0) suite=trixie script= experimental= ;;
3.2) suite=forky script=/usr/share/debootstrap/scripts/sid experimental= ;;
3.4) suite=sid script= experimental=yes ;;
*)
	echo "usage: haproxy-root.sh 3.0|3.2|3.4" >&2
	exit 2
	;;
esac
root=${HAPSUPER_HAPROXY_ROOTS:-/var/cache/hapsuper}/haproxy-$want

version() { chroot "$1" /usr/sbin/haproxy -v 2>/dev/null | sed -n 1p; }

if [ -x "$root/usr/sbin/haproxy" ] && v=$(version "$root") && case "$v" in "HAProxy version $want."*) true ;; *) false ;; esac; then
	echo "cached: $root"
	echo "$v"
	exit 0
fi

if [ "$(id -u)" != 0 ]; then
	echo "haproxy-root.sh: debootstrap and chroot need root; run it as root (CI does)" >&2
	exit 1
fi

if ! command -v debootstrap >/dev/null 2>&1; then
	echo "installing debootstrap"
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null ||
		{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null; }
fi

mirror=$(sh "$(dirname "$0")/debian-mirror.sh")
if [ -z "$mirror" ]; then
	echo "haproxy-root.sh: found no Debian mirror in /etc/apt/sources.list or /etc/apt/sources.list.d/ (need a 'deb' source for a Debian release such as bookworm)" >&2
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

log="$parent/debootstrap-$want.log"
start=$(date +%s)
include=--include=haproxy
[ -n "$experimental" ] && include=
echo "debootstrap $suite${include:+ with haproxy} from $mirror into $root"
# shellcheck disable=SC2086 # $script is one path or nothing
if ! debootstrap --variant=minbase $include "$suite" "$tmp" "$mirror" $script >"$log" 2>&1; then
	tail -20 "$log" >&2
	echo "haproxy-root.sh: debootstrap failed; full log: $log" >&2
	exit 1
fi
if [ -n "$experimental" ]; then
	# The mirror may be a dated snapshot whose Release files have expired:
	# apt checks Valid-Until, debootstrap does not.
	echo "deb $mirror experimental main" >"$tmp/etc/apt/sources.list.d/experimental.list"
	cp /etc/resolv.conf "$tmp/etc/resolv.conf" 2>/dev/null || true
	if ! chroot "$tmp" sh -euc 'export DEBIAN_FRONTEND=noninteractive
		apt-get -o Acquire::Check-Valid-Until=false update -qq
		apt-get install -y -qq --no-install-recommends -t experimental haproxy' >>"$log" 2>&1; then
		tail -20 "$log" >&2
		echo "haproxy-root.sh: installing haproxy from experimental failed; full log: $log" >&2
		exit 1
	fi
	chroot "$tmp" apt-get clean
fi
v=$(version "$tmp")
case "$v" in
"HAProxy version $want."*) ;;
*)
	echo "haproxy-root.sh: the $suite root's HAProxy is '$v', not $want: Debian moved on; update the table at the top of this script" >&2
	exit 1
	;;
esac
# A previous root that no longer runs is replaced.
remove_tree "$root"
mv "$tmp" "$root"
trap - EXIT INT TERM
echo "built in $(($(date +%s) - start))s, $(du -sh "$root" | cut -f1)"
echo "$v"
