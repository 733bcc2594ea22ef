#!/bin/sh
# haproxy-ingress.sh builds the real haproxy-ingress controller that the
# test/k8s harness runs next to hapsuper (the drop-in of
# deploy/haproxy-ingress), from the Go module proxy, and takes the rootfs/
# of its module zip (templates, lua files, start.sh), into a cache directory
# outside the repository:
#
#   ${HAPSUPER_HAPROXY_INGRESS_CACHE:-/var/cache/hapsuper/haproxy-ingress}/<version>/
#       haproxy-ingress-controller   the controller (main package pkg/)
#       rootfs/                      the module's rootfs/, as the image has it
#
# <version> is v0.16.1, the controller of chart 0.16.1; test/k8s computes
# the same directory. When both are present nothing is done ("cached").
# Everything is made under temporary names and renamed, so an interrupted
# run never leaves a half binary or tree. The last line printed is the
# directory. A cold build takes 2-4 minutes on 2 cores.
set -eu

version=${1:-v0.16.1}
module=github.com/jcmoraisjr/haproxy-ingress
dir=${HAPSUPER_HAPROXY_INGRESS_CACHE:-/var/cache/hapsuper/haproxy-ingress}/$version

if [ -x "$dir/haproxy-ingress-controller" ] && [ -f "$dir/rootfs/etc/templates/haproxy/haproxy.tmpl" ]; then
	echo "cached"
	echo "$dir"
	exit 0
fi

start=$(date +%s)
info=$(cd / && GOFLAGS=-mod=mod go mod download -json "$module@$version" 2>&1 || true)
src=$(printf '%s\n' "$info" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
if [ -z "$src" ] || [ ! -d "$src/pkg" ]; then
	printf '%s\n' "$info" | grep '"Error"' >&2 || true
	echo "haproxy-ingress.sh: go mod download $module@$version gave no source directory: check the version and that the Go module proxy serves it" >&2
	exit 1
fi
mkdir -p "$dir"
rm -rf "$dir"/.*.tmp.* # left by a run killed with SIGKILL

bin="$dir/.haproxy-ingress-controller.tmp.$$"
tree="$dir/.rootfs.tmp.$$"
trap 'rm -rf "$bin" "$tree"' EXIT
trap 'rm -rf "$bin" "$tree"; exit 130' INT TERM
if [ ! -x "$dir/haproxy-ingress-controller" ]; then
	# The module's own go.mod and go.sum pin its dependencies; the version
	# stamp is what the project's Makefile sets.
	(cd "$src" && CGO_ENABLED=0 GOFLAGS=-mod=readonly go build -trimpath -o "$bin" \
		-ldflags "-s -w -X $module/pkg/version.RELEASE=$version -X $module/pkg/version.REPO=https://$module" ./pkg)
	mv -f "$bin" "$dir/haproxy-ingress-controller"
fi
if [ ! -f "$dir/rootfs/etc/templates/haproxy/haproxy.tmpl" ]; then
	# The module cache is read-only: copy, then make the copy writable so
	# that the next run can replace it.
	cp -R "$src/rootfs" "$tree"
	chmod -R u+w "$tree"
	rm -rf "$dir/rootfs"
	mv "$tree" "$dir/rootfs"
fi
trap - EXIT INT TERM
echo "built in $(($(date +%s) - start))s: $("$dir/haproxy-ingress-controller" --version 2>&1 | head -1 || true)"
echo "$dir"
