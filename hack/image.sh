#!/bin/sh
# image.sh builds the image of the repository's Dockerfile, unchanged,
# without a Docker engine: buildah (Debian's) with vfs storage, chroot
# isolation, the host's network (the build stage's `go mod download` needs
# the Go module proxy) and no pulls. Everything lives in a cache directory
# outside the repository:
#
#   ${HAPSUPER_IMAGE_CACHE:-/var/cache/hapsuper/image}/
#     storage/, runroot/          buildah's image store (vfs)
#     tmp/                        buildah's RUN --mount=type=cache directories
#     hapsuper-haproxy.oci.tar    the built image, an oci-archive
#     hapsuper-sidecar.oci.tar    the Dockerfile's sidecar target (hapsuper
#                                 alone), an oci-archive
#
# Base images cannot be pulled here, so stand-ins are made once from Debian
# roots and tagged with the names the Dockerfile uses:
#
#   haproxy:<HAPROXY_VERSION>   the Debian root that haproxy-root.sh makes
#       for the Dockerfile's branch (3.4: a sid root with experimental's
#       HAProxy 3.4 package; the official 3.4 image is built on trixie) with
#       what the official image adds: haproxy also at
#       /usr/local/sbin/haproxy, user and group haproxy with uid and gid 99
#       and home /var/lib/haproxy, /usr/local/etc/haproxy, an entrypoint
#       script, STOPSIGNAL SIGUSR1, WORKDIR /var/lib/haproxy, USER haproxy
#       and its CMD. apt's package lists are left out.
#   golang:<tag of the build stage>   a Debian bookworm root (debootstrap
#       minbase, ca-certificates, and this machine's CA bundle so that the
#       module proxy's certificate verifies) with this machine's Go
#       toolchain at /usr/local/go, which must be the tag's release, and the
#       official image's GOPATH=/go, PATH and GOTOOLCHAIN=local.
#
# A stand-in is rebuilt when missing or made by an older recipe (the
# io.hapsuper.standin label, which the built image inherits). The image
# itself is built on every run, without buildah's layer cache (with vfs every
# layer is a full copy of the root: hundreds of MB per step and run) but with
# the build stage's module and build caches (its RUN --mount=type=cache
# directories persist in tmp/), and exported to the oci-archive (written
# under a temporary name and renamed).
# BuildKit sets TARGETOS and TARGETARCH by itself; buildah 1.28 does not,
# so they are passed as build arguments.
#
# Needs root; installs buildah and debootstrap from apt when missing. The
# last line printed is the archive's path.
set -eu

root=$(cd "$(dirname "$0")/.." && pwd)
cache=${HAPSUPER_IMAGE_CACHE:-/var/cache/hapsuper/image}
archive=$cache/hapsuper-haproxy.oci.tar
image=localhost/hapsuper-haproxy:latest
sidecar_archive=$cache/hapsuper-sidecar.oci.tar
sidecar_image=localhost/hapsuper-sidecar:latest
# standin_rev names the recipe of the stand-ins below: raise it when they change.
standin_rev=2

if [ "$(id -u)" != 0 ]; then
	echo "image.sh: buildah's chroot isolation and debootstrap need root; run it as root (CI does)" >&2
	exit 1
fi
for tool in buildah debootstrap; do
	command -v "$tool" >/dev/null 2>&1 && continue
	echo "installing $tool"
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$tool" >/dev/null ||
		{ apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$tool" >/dev/null; }
done

# The base names, read from the Dockerfile so that they are written once.
haproxy_version=$(sed -n 's/^ARG HAPROXY_VERSION=//p' "$root/Dockerfile")
golang_tag=$(sed -n 's/^FROM .*golang:\([^ ]*\) .*/\1/p' "$root/Dockerfile")
if [ -z "$haproxy_version" ] || [ -z "$golang_tag" ]; then
	echo "image.sh: the Dockerfile no longer has 'ARG HAPROXY_VERSION=' and a 'FROM … golang:<tag>' build stage; update this script with it" >&2
	exit 1
fi
go_release=${golang_tag%%-*}
haproxy_branch=${haproxy_version%.*}

mkdir -p "$cache/tmp"
# One run at a time: the storage is shared and stale containers are removed.
exec 9>"$cache/lock"
flock 9
# buildah puts the directories of RUN --mount=type=cache under TMPDIR.
export TMPDIR="$cache/tmp"
b() { buildah --root "$cache/storage" --runroot "$cache/runroot" --storage-driver vfs "$@"; }
b rm --all >/dev/null # working containers of an interrupted run

# current <name>: the stand-in exists and was made by this recipe.
current() {
	[ "$(b inspect --type image --format '{{index .OCIv1.Config.Labels "io.hapsuper.standin"}}' "$1" 2>/dev/null)" = "$standin_rev" ]
}

# standin_haproxy makes haproxy:<version> from the root of its branch.
standin_haproxy() {
	name=docker.io/library/haproxy:$haproxy_version
	current "$name" && { echo "stand-in $name: cached"; return 0; }
	sh "$root/hack/haproxy-root.sh" "$haproxy_branch" >&2
	haproxy_root=${HAPSUPER_HAPROXY_ROOTS:-/var/cache/hapsuper}/haproxy-$haproxy_branch
	start=$(date +%s)
	ctr=$(b from scratch)
	mnt=$(b mount "$ctr")
	cp -a "$haproxy_root/." "$mnt/"
	rm -rf "$mnt"/var/lib/apt/lists/*
	chroot "$mnt" sh -euc '
		groupmod --gid 99 haproxy
		usermod --uid 99 --gid 99 --home /var/lib/haproxy haproxy
		chown haproxy:haproxy /var/lib/haproxy
		mkdir -p /usr/local/sbin /usr/local/bin /usr/local/etc/haproxy
		ln -sf /usr/sbin/haproxy /usr/local/sbin/haproxy'
	cat >"$mnt/usr/local/bin/docker-entrypoint.sh" <<-'EOF'
		#!/bin/sh
		# Stand-in for the official image's entrypoint: arguments that
		# start with a dash are HAProxy's.
		set -e
		case "${1-}" in -*) set -- haproxy "$@" ;; esac
		exec "$@"
	EOF
	chmod 755 "$mnt/usr/local/bin/docker-entrypoint.sh"
	b umount "$ctr" >/dev/null
	b config --label io.hapsuper.standin=$standin_rev \
		--env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
		--stop-signal SIGUSR1 --workingdir /var/lib/haproxy --user haproxy \
		--entrypoint '["docker-entrypoint.sh"]' --cmd '["haproxy","-f","/usr/local/etc/haproxy/haproxy.cfg"]' "$ctr"
	b commit --quiet --rm "$ctr" "$name" >/dev/null
	echo "stand-in $name: made in $(($(date +%s) - start))s"
}

# standin_golang makes golang:<tag> from a bookworm root and this
# machine's Go toolchain.
standin_golang() {
	name=docker.io/library/golang:$golang_tag
	current "$name" && { echo "stand-in $name: cached"; return 0; }
	goroot=$(go env GOROOT)
	have=$("$goroot/bin/go" env GOVERSION)
	if [ "$have" != "go$go_release" ]; then
		echo "image.sh: the build stage is golang:$golang_tag but this machine's Go is $have; install Go $go_release (the release go.mod names)" >&2
		exit 1
	fi
	mirror=$(sh "$root/hack/debian-mirror.sh")
	[ -n "$mirror" ] || { echo "image.sh: found no Debian mirror in apt's sources" >&2; exit 1; }
	start=$(date +%s)
	tmp="$cache/tmp/bookworm.$$"
	trap 'rm -rf --one-file-system "$tmp"' EXIT
	trap 'rm -rf --one-file-system "$tmp"; exit 130' INT TERM
	if ! debootstrap --variant=minbase --include=ca-certificates bookworm "$tmp" "$mirror" >"$cache/debootstrap-bookworm.log" 2>&1; then
		tail -20 "$cache/debootstrap-bookworm.log" >&2
		echo "image.sh: debootstrap bookworm failed; full log: $cache/debootstrap-bookworm.log" >&2
		exit 1
	fi
	rm -rf "$tmp"/var/cache/apt/archives/*.deb "$tmp"/var/lib/apt/lists/*
	cp /etc/ssl/certs/ca-certificates.crt "$tmp/etc/ssl/certs/ca-certificates.crt"
	ctr=$(b from scratch)
	mnt=$(b mount "$ctr")
	cp -a "$tmp/." "$mnt/"
	rm -rf --one-file-system "$tmp"
	trap - EXIT INT TERM
	cp -a "$goroot" "$mnt/usr/local/go"
	mkdir -p "$mnt/go/src" "$mnt/go/bin"
	chmod -R 1777 "$mnt/go"
	b umount "$ctr" >/dev/null
	b config --label io.hapsuper.standin=$standin_rev \
		--env GOLANG_VERSION="$go_release" --env GOTOOLCHAIN=local --env GOPATH=/go \
		--env PATH=/go/bin:/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
		--workingdir /go --cmd '["bash"]' "$ctr"
	b commit --quiet --rm "$ctr" "$name" >/dev/null
	echo "stand-in $name: made in $(($(date +%s) - start))s"
}

standin_haproxy
standin_golang

start=$(date +%s)
version=$(git -C "$root" describe --tags --always --dirty 2>/dev/null || echo dev)
arch=$(go env GOARCH)
echo "building $image (version $version) from $root/Dockerfile"
# bud [buildah flags]: the final stage, or with --target another one.
bud() {
	b bud --isolation chroot --network host --pull-never \
		--build-arg TARGETOS=linux --build-arg TARGETARCH="$arch" --build-arg VERSION="$version" \
		-f "$root/Dockerfile" "$@" "$root" >"$cache/build.log" 2>&1
}
# One retry: on a fresh machine under load a RUN step failed once with
# buildah's "Close_Fd sealing memfd copy: Device or resource busy" and
# passed when run again; a second failure is real.
if ! bud -t "$image"; then
	echo "image.sh: buildah bud failed once ($(grep -m1 -iE 'error|busy' "$cache/build.log" || echo 'see the log')); trying again" >&2
	cp "$cache/build.log" "$cache/build-first-try.log"
	if ! bud -t "$image"; then
		tail -30 "$cache/build.log" >&2
		echo "image.sh: buildah bud failed twice; full logs: $cache/build-first-try.log, $cache/build.log" >&2
		exit 1
	fi
fi
# The sidecar target: the build stage's caches make it a matter of seconds.
if ! bud --target sidecar -t "$sidecar_image"; then
	tail -30 "$cache/build.log" >&2
	echo "image.sh: buildah bud --target sidecar failed; full log: $cache/build.log" >&2
	exit 1
fi
rm -f "$cache"/.hapsuper-haproxy.oci.tar.* "$cache"/.hapsuper-sidecar.oci.tar.*
tmp_archive="$cache/.hapsuper-haproxy.oci.tar.$$"
b push --quiet "$image" "oci-archive:$tmp_archive:$image"
mv -f "$tmp_archive" "$archive"
tmp_archive="$cache/.hapsuper-sidecar.oci.tar.$$"
b push --quiet "$sidecar_image" "oci-archive:$tmp_archive:$sidecar_image"
mv -f "$tmp_archive" "$sidecar_archive"
b rmi --prune >/dev/null # the image of the previous run, untagged by this one
echo "built in $(($(date +%s) - start))s"
echo "$sidecar_archive"
echo "$archive"
