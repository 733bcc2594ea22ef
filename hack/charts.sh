#!/usr/bin/env bash
# charts.sh puts the Helm charts the manifests tests render into
# /var/cache/hapsuper/charts (HAPSUPER_CHARTS), from the peers' source
# tarballs: $HAPSUPER_PEERS, else ../shared/peers beside the repository,
# else /work/shared/peers. Each is checked against its sha256 (the peers'
# README lists them); a copy already in place costs nothing.
set -euo pipefail
cd "$(dirname "$0")/.."

dest=${HAPSUPER_CHARTS:-/var/cache/hapsuper/charts}
peers=${HAPSUPER_PEERS:-}
if [ -z "$peers" ]; then
	for d in ../shared/peers /work/shared/peers; do
		if [ -d "$d" ]; then peers=$d; break; fi
	done
fi
if [ -z "$peers" ] || [ ! -d "$peers" ]; then
	echo "charts: no peers directory (set HAPSUPER_PEERS to the folder holding the charts' tarballs)" >&2
	exit 1
fi

mkdir -p "$dest"
while read -r sum file; do
	if [ -f "$dest/$file" ] && echo "$sum  $dest/$file" | sha256sum -c --quiet - 2>/dev/null; then
		continue
	fi
	if [ ! -f "$peers/$file" ]; then
		echo "charts: $file is not in $peers" >&2
		exit 1
	fi
	echo "$sum  $peers/$file" | sha256sum -c --quiet - || { echo "charts: $peers/$file does not match its sha256" >&2; exit 1; }
	cp "$peers/$file" "$dest/$file.tmp" && mv "$dest/$file.tmp" "$dest/$file"
	echo "charts: $file"
done <<'LIST'
8edf5802d9687794eac6a372872df96135bee375668ab223556b1a18de9a86dc haproxy-ingress-chart-0.16.1.tar.gz
68cfc55ba11f651c857ae94ddccf0c2654edfe8a0b154972e165d779f5cb260b haproxytech-kubernetes-ingress-chart-1.52.1.tar.gz
c6ab83e6496e8aeb693b5827e7cbe0b51e357233c5c66d99c81e45c876348f04 haproxy-unified-gateway-chart-1.1.0.tar.gz
baccb0815a7111f65b93bb1922ed89af8629c331b9773de74c954bde853a7f9c haproxytech-haproxy-chart-1.29.0.tar.gz
LIST

# Helm, pinned, for `helm template` of those charts.
helm_version=$(/var/cache/hapsuper/bin/helm version --short 2>/dev/null || true)
if [[ "$helm_version" != v3.21.4* ]]; then
	echo "charts: building Helm v3.21.4"
	GOBIN=/var/cache/hapsuper/bin GOFLAGS=-trimpath go install helm.sh/helm/v3/cmd/helm@v3.21.4
fi
