#!/usr/bin/env bash
# setup.sh makes this machine able to run every test: the first step of
# `make test`. Idempotent and cached: what is there already is not made
# again, so a second run costs a few seconds. Needs root (apt, debootstrap,
# buildah); without root it says what it cannot do and the tests that need
# it skip, saying why.
#
#   Debian packages      haproxy (2.6, the host's), the tools the tests
#                        drive (socat, s6, curl, wrk, h2load, iproute2, nftables,
#                        iptables, conntrack, util-linux, procps), gcc,
#                        debootstrap, buildah, containerd, runc,
#                        containernetworking-plugins: apt-get only when one
#                        is missing
#   Kubernetes binaries  hack/k8s-binaries.sh: kube-apiserver,
#                        kube-controller-manager, kube-proxy, kubelet, etcd
#                        from the Go module proxy (~15 min cold)
#   kubernetes-ingress   hack/haproxytech-controller.sh: HAProxy Technologies'
#                        controller v3.2.11 from the peers' source tarball
#                        ($HAPSUPER_PEERS, else ../shared/peers beside the
#                        repository, else /work/shared/peers; 7-14 min cold)
#   HAProxy 3.0/3.2/3.4  hack/haproxy-root.sh: Debian roots (~1 min each cold)
#   charts, Helm         hack/charts.sh: the peers' chart tarballs (sha256
#                        checked) and Helm v3.21.4 from the Go module proxy
#   the images           hack/image.sh: the Dockerfile built by buildah, its
#                        final stage and its sidecar target (~3 min cold,
#                        ~1.5 min with its bases cached)
#
# Everything it makes lives under /var/cache/hapsuper, outside the
# repository.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$(id -u)" != 0 ]; then
	echo "setup: not root: no packages, Kubernetes binaries, HAProxy roots or image are made; the tests that need them skip and say so"
	exit 0
fi

start=$(date +%s)
packages=(haproxy socat s6 curl wrk make gcc libc6-dev util-linux procps iproute2 nftables iptables conntrack ca-certificates debootstrap buildah containerd runc containernetworking-plugins nghttp2-client)
missing=()
for p in "${packages[@]}"; do
	[ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)" = "install ok installed" ] || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
	echo "setup: installing ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
echo "setup: $(haproxy -v 2>&1 | sed -n 1p); $(go version)"

echo "setup: Kubernetes test binaries"
bash hack/k8s-binaries.sh
bash hack/haproxy-ingress.sh # haproxy-ingress v0.16.1 and its rootfs/ for test/k8s (~3 min cold)
sh hack/haproxytech-controller.sh # kubernetes-ingress v3.2.11 from the peers' tarball, for test/k8s (7-14 min cold)
for v in 3.0 3.2 3.4; do
	echo "setup: HAProxy $v root"
	bash hack/haproxy-root.sh "$v"
done
echo "setup: the charts and Helm"
bash hack/charts.sh # the peers' chart tarballs and Helm v3.21.4, for test/manifests (~5 min cold)
echo "setup: the image"
bash hack/image.sh
echo "setup: the haproxytech drop-in images"
sh hack/image-haproxytech.sh # both haproxytech drop-ins on stand-in controller images, for test/image (~1 min, reuses image.sh's stand-ins)
echo "setup: done in $(($(date +%s) - start))s"
