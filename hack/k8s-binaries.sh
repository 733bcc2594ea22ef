#!/bin/sh
# k8s-binaries.sh builds the real Kubernetes and etcd binaries that the
# test/k8s harness runs (etcd, kube-apiserver, kube-controller-manager,
# kube-proxy, kubelet) from the separate tools/k8s module, into a cache directory
# outside the repository:
#
#   ${HAPSUPER_K8S_CACHE:-/var/cache/hapsuper/k8s}/<key>/
#
# where <key> is v1.37.2-<first 12 hex digits of sha256(tools/k8s/go.sum)>.
# test/k8s computes the same directory. When all five binaries are present
# the build is skipped ("cached"). Each binary is written under a temporary
# name and renamed, so an interrupted build never leaves a half binary.
# The last line printed is the directory.
#
# A cold build takes about 15 minutes on 2 cores (the kubelet ~5 of them)
# and ~5 GB of Go caches.
set -eu

version=v1.37.2
minor=37
root=$(cd "$(dirname "$0")/.." && pwd)
tools=$root/tools/k8s
sum=$(sha256sum "$tools/go.sum" | cut -c1-12)
dir=${HAPSUPER_K8S_CACHE:-/var/cache/hapsuper/k8s}/$version-$sum

have_all() {
	for b in etcd kube-apiserver kube-controller-manager kube-proxy kubelet; do
		[ -x "$dir/$b" ] || return 1
	done
}

if have_all; then
	echo "cached"
	echo "$dir"
	exit 0
fi

mkdir -p "$dir"
rm -f "$dir"/.*.tmp.* # left by a build killed with SIGKILL
ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$version -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor"

build() { # build <binary name> <package>
	[ -x "$dir/$1" ] && { echo "$1: present"; return 0; }
	tmp="$dir/.$1.tmp.$$"
	trap 'rm -f "$tmp"' EXIT
	trap 'rm -f "$tmp"; exit 130' INT TERM
	start=$(date +%s)
	(cd "$tools" && CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$tmp" "$2")
	mv -f "$tmp" "$dir/$1"
	trap - EXIT INT TERM
	echo "$1: built in $(($(date +%s) - start))s"
}

build etcd go.etcd.io/etcd/server/v3
build kube-proxy k8s.io/kubernetes/cmd/kube-proxy
build kube-controller-manager k8s.io/kubernetes/cmd/kube-controller-manager
build kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver
build kubelet k8s.io/kubernetes/cmd/kubelet
echo "$dir"
