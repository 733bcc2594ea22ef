# failures.awk reads `go test -v` output and prints, for each failed test,
# its own log lines (file.go:N: ...) and the first lines under each, so
# that .ci/run's summary says why a test failed: a harness dumps its
# processes' logs after the failure, and a summary that shows only the
# output's end would show those. Dumped logs ("… log ends:") are left out.
/^=== (RUN|CONT|NAME) / { name = $3; next }
/^    [A-Za-z0-9_]+\.go:[0-9]+: / && name != "" {
	n[name]++
	keep = n[name] <= 40 && $0 !~ /log ends:$/
	if (keep) buf[name] = buf[name] substr($0, 1, 300) "\n"
	cont = 0
	next
}
/^        / && name != "" {
	if (keep && ++cont <= 4) buf[name] = buf[name] substr($0, 1, 300) "\n"
	next
}
/^ *--- FAIL: / { printf "--- FAIL: %s; its own lines:\n%s", $3, buf[$3] }
