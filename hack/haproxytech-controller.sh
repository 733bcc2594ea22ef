#!/bin/sh
# haproxytech-controller.sh builds HAProxy Technologies' Kubernetes Ingress
# Controller v3.2.11 (the controller of deploy/haproxytech-ingress) from the
# peers' source tarball, for test/k8s, into a cache directory outside the
# repository:
#
#   ${HAPSUPER_HAPROXYTECH_CACHE:-/var/cache/hapsuper/haproxytech-controller}/v3.2.11-<sha256[:12]>/
#       haproxy-ingress-controller   the controller (static, ~104 MB)
#       haproxy.cfg                  the image's HAProxy configuration
#                                    (fs/usr/local/etc/haproxy/haproxy.cfg)
#
# The tarball is $HAPSUPER_PEERS/kubernetes-ingress-v3.2.11.tar.gz, else
# ../shared/peers beside the repository, else /work/shared/peers; its
# sha256 is checked. test/k8s computes the same directory. When it is
# complete nothing is done ("cached"). Everything is made under temporary
# names and renamed, so an interrupted run never leaves a half binary. The
# last line printed is the directory. A build takes 7-14 minutes on 2 cores
# (the Go build cache warm or cold).
set -eu
cd "$(dirname "$0")/.."

version=v3.2.11
file=kubernetes-ingress-$version.tar.gz
sum=c0b95aa8006a64428d1beabfa9ed1f606e44ca5ef654df27659c9097d8f2992c
dir=${HAPSUPER_HAPROXYTECH_CACHE:-/var/cache/hapsuper/haproxytech-controller}/$version-$(printf %.12s "$sum")

if [ -x "$dir/haproxy-ingress-controller" ] && [ -f "$dir/haproxy.cfg" ]; then
	echo "cached"
	echo "$dir"
	exit 0
fi

peers=${HAPSUPER_PEERS:-}
if [ -z "$peers" ]; then
	for d in ../shared/peers /work/shared/peers; do
		if [ -f "$d/$file" ]; then peers=$d; break; fi
	done
fi
if [ -z "$peers" ] || [ ! -f "$peers/$file" ]; then
	echo "haproxytech-controller.sh: no $file in ${peers:-../shared/peers or /work/shared/peers} (set HAPSUPER_PEERS to the folder holding it)" >&2
	exit 1
fi
echo "$sum  $peers/$file" | sha256sum -c --quiet - || {
	echo "haproxytech-controller.sh: $peers/$file does not match its sha256 $sum" >&2
	exit 1
}

start=$(date +%s)
mkdir -p "$dir"
rm -rf "$dir"/.*.tmp.* # left by a run killed with SIGKILL
src="$dir/.src.tmp.$$"
bin="$dir/.haproxy-ingress-controller.tmp.$$"
trap 'rm -rf "$src" "$bin"' EXIT
trap 'rm -rf "$src" "$bin"; exit 130' INT TERM
mkdir -p "$src"
tar -xzf "$peers/$file" -C "$src"
tree="$src/kubernetes-ingress-$version"
if [ ! -f "$tree/go.mod" ]; then
	echo "haproxytech-controller.sh: $file has no kubernetes-ingress-$version/go.mod" >&2
	exit 1
fi
# The tree's own go.mod and go.sum pin its dependencies (the Go module proxy
# serves them); the version stamp is what the project's release sets.
(cd "$tree" && CGO_ENABLED=0 GOFLAGS=-mod=readonly go build -trimpath -o "$bin" \
	-ldflags "-X github.com/haproxytech/kubernetes-ingress/pkg/version.GitTag=$version" .)
cp "$tree/fs/usr/local/etc/haproxy/haproxy.cfg" "$dir/.haproxy.cfg.tmp.$$"
mv -f "$dir/.haproxy.cfg.tmp.$$" "$dir/haproxy.cfg"
mv -f "$bin" "$dir/haproxy-ingress-controller"
trap - EXIT INT TERM
rm -rf "$src"
echo "built in $(($(date +%s) - start))s"
echo "$dir"
