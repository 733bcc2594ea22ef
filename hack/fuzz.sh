#!/usr/bin/env bash
# fuzz.sh runs the module's Go fuzz targets one after the other, each for
# FUZZTIME (default 60s), and prints a table: target, wall time, execs,
# result. It exits 1 if any target failed (a crash, a broken property, or a
# build error), 2 if a Fuzz function exists that the list below lacks.
#
#   hack/fuzz.sh                      every target
#   hack/fuzz.sh FuzzSample FuzzParse only these
#   FUZZTIME=5s hack/fuzz.sh          (make fuzz-short)
#   FUZZPARALLEL=2 hack/fuzz.sh       fuzzing processes per target (default 1)
#
# A failing input is written by go test to <pkg>/testdata/fuzz/<Target>/<id>;
# the table's line says how to run it again. Once committed it stays a
# regression test of plain `go test`. Every target's seeds also run in plain
# `go test`, without this script.
set -uo pipefail

# The fuzz targets, as <package dir>:<Fuzz function>. Keep this list whole:
# the script refuses to run when a Fuzz function is missing from it.
targets=(
	./runtimeapi:FuzzParseShowProc
	./runtimeapi:FuzzParseShowInfo
	./runtimeapi:FuzzParseShowStat
	./runtimeapi:FuzzSplitOutputs
	./runtimeapi:FuzzSample
	./status:FuzzServerRequest
	./conf:FuzzParse
	./routing:FuzzParseHealthz
	./routing:FuzzHealthzExchange
	./drain:FuzzDrain
)

fuzztime=${FUZZTIME:-60s}
parallel=${FUZZPARALLEL:-1}
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root" || exit 1

# Every `func FuzzX(f *testing.F)` of the module (test/ and tools/ hold no
# unit fuzz targets) must be listed.
declare -A listed=()
for t in "${targets[@]}"; do listed[$t]=1; done
missing=0
while IFS=: read -r file name; do
	dir=./$(dirname "$file")
	if [ -z "${listed[$dir:$name]:-}" ]; then
		echo "fuzz.sh: $dir:$name ($file) is not in the targets list of hack/fuzz.sh: add it" >&2
		missing=1
	fi
done < <(grep -rHoE --include='*_test.go' '^func Fuzz[A-Za-z0-9_]+\(f \*testing\.F\)' . |
	sed -E 's|^\./||; s|:func (Fuzz[A-Za-z0-9_]+)\(.*|:\1|')
[ "$missing" = 0 ] || exit 2

selected=()
for t in "${targets[@]}"; do
	if [ $# -eq 0 ]; then
		selected+=("$t")
		continue
	fi
	for want in "$@"; do
		[ "${t#*:}" = "$want" ] && selected+=("$t")
	done
done
if [ ${#selected[@]} -eq 0 ]; then
	echo "fuzz.sh: no target named $*; the targets are: ${targets[*]#*:}" >&2
	exit 2
fi

logdir=$(mktemp -d "${TMPDIR:-/tmp}/hapsuper-fuzz.XXXXXX")
rows=()
failed=0
for t in "${selected[@]}"; do
	pkg=${t%%:*} name=${t#*:}
	log=$logdir/$name.log
	echo "=== $name ($pkg) for $fuzztime, -parallel $parallel"
	start=$(date +%s%N)
	go test -run '^$' -fuzz "^$name\$" -fuzztime "$fuzztime" -parallel "$parallel" "$pkg" 2>&1 | tee "$log"
	rc=${PIPESTATUS[0]}
	secs=$(( ($(date +%s%N) - start) / 1000000 ))
	secs=$(printf '%d.%03ds' $((secs / 1000)) $((secs % 1000)))
	# go test prints "fuzz: elapsed: 60s, execs: 1234 (20/sec), new interesting: ..."
	execs=$(sed -nE 's/^fuzz: elapsed: [^,]*, execs: ([0-9]+).*/\1/p' "$log" | tail -n 1)
	result=PASS
	if [ "$rc" != 0 ]; then
		result=FAIL
		failed=1
		input=$(sed -nE 's|.*Failing input written to (testdata/fuzz/[^ ]+).*|\1|p' "$log" | tail -n 1)
		[ -n "$input" ] && result="FAIL: go test -run '$name/${input##*/}' $pkg"
	fi
	rows+=("$name|$pkg|$secs|${execs:-0}|$result")
	echo "=== $name: $result after $secs, ${execs:-0} execs"
done

echo
{
	echo "TARGET|PACKAGE|TIME|EXECS|RESULT"
	printf '%s\n' "${rows[@]}"
} | awk -F'|' '{ printf "%-20s %-13s %-10s %-10s %s\n", $1, $2, $3, $4, $5 }'
echo "(logs in $logdir)"
exit "$failed"
