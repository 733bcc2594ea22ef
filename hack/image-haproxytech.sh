#!/bin/sh
# image-haproxytech.sh builds the Dockerfiles of deploy/haproxytech-ingress
# and deploy/haproxy-unified-gateway, unchanged, the way image.sh builds the
# repository's Dockerfile (buildah, vfs storage, chroot isolation, no
# pulls), each on a stand-in for its controller's image, and exports them
# next to image.sh's archive:
#
#   ${HAPSUPER_IMAGE_CACHE:-/var/cache/hapsuper/image}/haproxytech-ingress.oci.tar
#   ${HAPSUPER_IMAGE_CACHE:-/var/cache/hapsuper/image}/haproxy-unified-gateway.oci.tar
#
# Run image.sh first: the stand-ins it makes (haproxy:<version>, golang:<tag>)
# and its storage are reused. The controllers' images cannot be pulled here;
# their stand-ins, tagged with the names the Dockerfiles' CONTROLLER_IMAGE
# give, are made from the haproxy stand-in with the controller images'
# layout:
#
#   /usr/local/sbin/haproxy          HAProxy (the stand-in's Debian package)
#   /usr/local/sbin/haproxy_wrapper  a script that marks HAPROXY_WRAPPED=1
#                                    in HAProxy's environment and execs it,
#                                    as the real wrapper sets LD_PRELOAD
#   the controller                   the stand-in controller ($controller_pkg,
#                                    built static), which writes the
#                                    configuration and reloads over the
#                                    master socket as the real one does:
#                                    /haproxy-ingress-controller, or HUG's
#                                    /usr/local/sbin/hug
#   the configuration                one HAProxy starts with:
#                                    /etc/haproxy/haproxy.cfg, or HUG's
#                                    /usr/local/hug/haproxy.cfg and the aux
#                                    directory /usr/local/hug/aux
#   /etc/gopherd/gopherd.yml         a placeholder, as the images have one
#   /run and the configuration owned by user haproxy (the real images chown
#   /run and /var to it), STOPSIGNAL SIGTERM, USER root, no entrypoint of
#   its own
#
# Needs root. The last line printed is the last archive's path.
set -eu

root=$(cd "$(dirname "$0")/.." && pwd)
cache=${HAPSUPER_IMAGE_CACHE:-/var/cache/hapsuper/image}
# The stand-in controller's main package, in the test module.
controller_pkg=${HAPSUPER_STANDIN_CONTROLLER:-./harness/standin/controller}
standin_rev=2

if [ "$(id -u)" != 0 ]; then
	echo "image-haproxytech.sh: buildah's chroot isolation needs root; run it as root (CI does)" >&2
	exit 1
fi
haproxy_version=$(sed -n 's/^ARG HAPROXY_VERSION=//p' "$root/Dockerfile")
if [ -z "$haproxy_version" ]; then
	echo "image-haproxytech.sh: no 'ARG HAPROXY_VERSION=' in the Dockerfile; update this script" >&2
	exit 1
fi
mkdir -p "$cache/tmp"
exec 9>"$cache/lock"
flock 9
export TMPDIR="$cache/tmp"
b() { buildah --root "$cache/storage" --runroot "$cache/runroot" --storage-driver vfs "$@"; }
b rm --all >/dev/null

haproxy_standin=docker.io/library/haproxy:$haproxy_version
if ! b inspect --type image "$haproxy_standin" >/dev/null 2>&1; then
	echo "image-haproxytech.sh: no stand-in $haproxy_standin: run hack/image.sh first" >&2
	exit 1
fi
bin="$cache/tmp/standin-controller.$$"
trap 'rm -f "$bin"' EXIT
(cd "$root/test" && CGO_ENABLED=0 go build -trimpath -o "$bin" "$controller_pkg")
version=$(git -C "$root" describe --tags --always --dirty 2>/dev/null || echo dev)
arch=$(go env GOARCH)

# build <drop-in> <controller path> <configuration file> [<aux directory>]
# makes the stand-in of the drop-in's CONTROLLER_IMAGE and builds the
# drop-in's Dockerfile on it into $cache/<drop-in>.oci.tar.
build() {
	dropin=$1 controller=$2 cfg=$3 auxdir=${4-}
	dockerfile=$root/deploy/$dropin/Dockerfile
	controller_image=$(sed -n 's/^ARG CONTROLLER_IMAGE=//p' "$dockerfile")
	if [ -z "$controller_image" ]; then
		echo "image-haproxytech.sh: no 'ARG CONTROLLER_IMAGE=' in $dockerfile; update this script" >&2
		exit 1
	fi
	name=docker.io/$controller_image
	start=$(date +%s)
	ctr=$(b from --pull-never "$haproxy_standin")
	mnt=$(b mount "$ctr")
	mkdir -p "$mnt$(dirname "$controller")" "$mnt$(dirname "$cfg")" "$mnt/etc/gopherd"
	install -m 0755 "$bin" "$mnt$controller"
	cat >"$mnt/usr/local/sbin/haproxy_wrapper" <<-'EOF'
		#!/bin/sh
		# Stand-in for the image's haproxy_wrapper, which sets LD_PRELOAD and
		# execs HAProxy: it marks the environment instead.
		export HAPROXY_WRAPPED=1
		exec /usr/local/sbin/haproxy "$@"
	EOF
	chmod 755 "$mnt/usr/local/sbin/haproxy_wrapper"
	cat >"$mnt$cfg" <<-'EOF'
		# The stand-in image's configuration, until the controller writes its own.
		global
		    stats timeout 2m
		defaults
		    mode http
		    timeout connect 5s
		    timeout client 30s
		    timeout server 30s
		    option idle-close-on-response
		    timeout client-fin 5s
		frontend http
		    bind :8080
		    http-request return status 200 content-type text/plain string "stand-in"
	EOF
	[ -z "$auxdir" ] || mkdir -p "$mnt$auxdir"
	echo "# stand-in: the real image's gopherd configuration is not used under hapsuper" >"$mnt/etc/gopherd/gopherd.yml"
	# The image's haproxy (uid 99 in the stand-in), as the real images chown /run and /var.
	chroot "$mnt" chown -R haproxy:haproxy "$(dirname "$cfg")" /run /var/lib/haproxy
	b umount "$ctr" >/dev/null
	b config --label io.hapsuper.standin=haproxytech-$standin_rev \
		--stop-signal SIGTERM --user root --workingdir / \
		--entrypoint '[]' --cmd '[]' "$ctr"
	b commit --quiet --rm "$ctr" "$name" >/dev/null
	echo "stand-in $name: made in $(($(date +%s) - start))s"

	start=$(date +%s)
	image=localhost/$dropin-hapsuper:latest
	log=$cache/build-$dropin.log
	echo "building $image (version $version) from $dockerfile"
	if ! b bud --isolation chroot --network host --pull-never \
		--build-arg TARGETOS=linux --build-arg TARGETARCH="$arch" --build-arg VERSION="$version" \
		-t "$image" -f "$dockerfile" "$root" >"$log" 2>&1; then
		tail -30 "$log" >&2
		echo "image-haproxytech.sh: buildah bud failed; full log: $log" >&2
		exit 1
	fi
	archive=$cache/$dropin.oci.tar
	rm -f "$cache/.$dropin.oci.tar".*
	tmp_archive="$cache/.$dropin.oci.tar.$$"
	b push --quiet "$image" "oci-archive:$tmp_archive:$image"
	mv -f "$tmp_archive" "$archive"
	echo "built in $(($(date +%s) - start))s: $archive"
}

build haproxytech-ingress /haproxy-ingress-controller /etc/haproxy/haproxy.cfg
build haproxy-unified-gateway /usr/local/sbin/hug /usr/local/hug/haproxy.cfg /usr/local/hug/aux
b rmi --prune >/dev/null
echo "$archive"
