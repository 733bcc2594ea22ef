#!/bin/sh
# image-haproxytech.sh builds deploy/haproxytech-ingress/Dockerfile,
# unchanged, the way image.sh builds the repository's Dockerfile (buildah,
# vfs storage, chroot isolation, no pulls), on a stand-in for the
# controller's image, and exports it next to image.sh's archive:
#
#   ${HAPSUPER_IMAGE_CACHE:-/var/cache/hapsuper/image}/haproxytech-ingress.oci.tar
#
# Run image.sh first: the stand-ins it makes (haproxy:<version>, golang:<tag>)
# and its storage are reused. The controller's image cannot be pulled here;
# its stand-in, tagged with the name the Dockerfile's CONTROLLER_IMAGE
# names, is made from the haproxy stand-in with the controller image's
# layout:
#
#   /usr/local/sbin/haproxy          HAProxy (the stand-in's Debian package)
#   /usr/local/sbin/haproxy_wrapper  a script that marks HAPROXY_WRAPPED=1
#                                    in HAProxy's environment and execs it,
#                                    as the real wrapper sets LD_PRELOAD
#   /haproxy-ingress-controller      the stand-in controller ($controller_pkg,
#                                    built static), which writes the
#                                    configuration and reloads over the
#                                    master socket as the real one does
#   /etc/haproxy/haproxy.cfg         a configuration HAProxy starts with
#   /etc/gopherd/gopherd.yml         a placeholder, as the image has one
#   /run and /etc/haproxy owned by user haproxy (the real image chowns /run
#   and /var to it), STOPSIGNAL SIGTERM, USER root, ENTRYPOINT /start.sh
#
# Needs root. The last line printed is the archive's path.
set -eu

root=$(cd "$(dirname "$0")/.." && pwd)
cache=${HAPSUPER_IMAGE_CACHE:-/var/cache/hapsuper/image}
archive=$cache/haproxytech-ingress.oci.tar
image=localhost/haproxytech-ingress-hapsuper:latest
dockerfile=$root/deploy/haproxytech-ingress/Dockerfile
# The stand-in controller's main package, in the test module.
controller_pkg=${HAPSUPER_STANDIN_CONTROLLER:-./harness/standin/controller}
standin_rev=1

if [ "$(id -u)" != 0 ]; then
	echo "image-haproxytech.sh: buildah's chroot isolation needs root; run it as root (CI does)" >&2
	exit 1
fi
haproxy_version=$(sed -n 's/^ARG HAPROXY_VERSION=//p' "$root/Dockerfile")
controller_image=$(sed -n 's/^ARG CONTROLLER_IMAGE=//p' "$dockerfile")
if [ -z "$haproxy_version" ] || [ -z "$controller_image" ]; then
	echo "image-haproxytech.sh: no 'ARG HAPROXY_VERSION=' in the Dockerfile or no 'ARG CONTROLLER_IMAGE=' in $dockerfile; update this script" >&2
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

name=docker.io/$controller_image
start=$(date +%s)
bin="$cache/tmp/standin-controller.$$"
trap 'rm -f "$bin"' EXIT
(cd "$root/test" && CGO_ENABLED=0 go build -trimpath -o "$bin" "$controller_pkg")
ctr=$(b from --pull-never "$haproxy_standin")
mnt=$(b mount "$ctr")
install -m 0755 "$bin" "$mnt/haproxy-ingress-controller"
cat >"$mnt/usr/local/sbin/haproxy_wrapper" <<-'EOF'
	#!/bin/sh
	# Stand-in for the image's haproxy_wrapper, which sets LD_PRELOAD and
	# execs HAProxy: it marks the environment instead.
	export HAPROXY_WRAPPED=1
	exec /usr/local/sbin/haproxy "$@"
EOF
chmod 755 "$mnt/usr/local/sbin/haproxy_wrapper"
mkdir -p "$mnt/etc/haproxy" "$mnt/etc/gopherd"
cat >"$mnt/etc/haproxy/haproxy.cfg" <<-'EOF'
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
echo "# stand-in: the real image's gopherd configuration is not used under hapsuper" >"$mnt/etc/gopherd/gopherd.yml"
chroot "$mnt" chown -R haproxy:haproxy /etc/haproxy /run /var/lib/haproxy # the image's haproxy, as the real image chowns /run and /var
b umount "$ctr" >/dev/null
b config --label io.hapsuper.standin=haproxytech-$standin_rev \
	--stop-signal SIGTERM --user root --workingdir / \
	--entrypoint '["/start.sh"]' --cmd '[]' "$ctr"
b commit --quiet --rm "$ctr" "$name" >/dev/null
echo "stand-in $name: made in $(($(date +%s) - start))s"

start=$(date +%s)
version=$(git -C "$root" describe --tags --always --dirty 2>/dev/null || echo dev)
arch=$(go env GOARCH)
echo "building $image (version $version) from $dockerfile"
if ! b bud --isolation chroot --network host --pull-never \
	--build-arg TARGETOS=linux --build-arg TARGETARCH="$arch" --build-arg VERSION="$version" \
	-t "$image" -f "$dockerfile" "$root" >"$cache/build-haproxytech.log" 2>&1; then
	tail -30 "$cache/build-haproxytech.log" >&2
	echo "image-haproxytech.sh: buildah bud failed; full log: $cache/build-haproxytech.log" >&2
	exit 1
fi
rm -f "$cache"/.haproxytech-ingress.oci.tar.*
tmp_archive="$cache/.haproxytech-ingress.oci.tar.$$"
b push --quiet "$image" "oci-archive:$tmp_archive:$image"
mv -f "$tmp_archive" "$archive"
b rmi --prune >/dev/null
echo "built in $(($(date +%s) - start))s"
echo "$archive"
