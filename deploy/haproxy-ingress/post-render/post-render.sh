#!/bin/sh
# Helm post-renderer (Helm 3 `--post-renderer <executable>`): reads the
# chart's manifests on stdin, applies kustomization.yaml next to this script,
# prints the result. Needs kubectl (or set KUSTOMIZE="kustomize build").
set -eu
here=$(cd "$(dirname "$0")" && pwd)
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cp "$here/kustomization.yaml" "$here/hapsuper-patch.yaml" "$here/hapsuper-rbac.yaml" "$dir/"
cat >"$dir/chart.yaml"
${KUSTOMIZE:-kubectl kustomize} "$dir"
