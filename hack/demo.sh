#!/usr/bin/env bash
# demo.sh is the README's first command: it builds ./bin/hapsuper as `make
# build` does (saying so first, and how far it got), then runs the binary's
# demo in its place, so that Ctrl-C reaches hapsuper alone and it exits 0
# after the drain (under go run or make, the go command or make would get
# the signal too and exit non-zero). Its arguments are the demo's:
#   hack/demo.sh -- /usr/sbin/haproxy
set -euo pipefail
cd "$(dirname "$0")/.."
command -v go >/dev/null || { echo "hack/demo.sh: no go on the PATH: install Go 1.26.8 or newer (https://go.dev/dl/)" >&2; exit 127; }
command -v make >/dev/null || { echo "hack/demo.sh: no make on the PATH: install it (Debian: apt-get install make)" >&2; exit 127; }
make --no-print-directory build
exec ./bin/hapsuper demo "$@"
