package main

import (
	"bytes"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"time"
)

// throughputResult is bench/throughput's summary.
type throughputResult struct {
	rounds      int
	bare, under float64 // median req/s
	ratio       float64 // median of the rounds' ratios
}

var (
	tpBare  = regexp.MustCompile(`\| HAProxy req/s bare [^|]*\| ([0-9.]+) \|`)
	tpUnder = regexp.MustCompile(`\| HAProxy req/s under hapsuper [^|]*\| ([0-9.]+) \|`)
	tpRatio = regexp.MustCompile(`\| ratio under/bare[^|]*\| ([0-9.]+) `)
)

// runThroughput runs bench/throughput with the already built hapsuper and
// reads its summary table; its per-round lines go to out as progress.
func runThroughput(root, bin string, rounds int, out io.Writer) (*throughputResult, error) {
	var buf bytes.Buffer
	cmd := exec.Command("go", "run", "./throughput", "-rounds", strconv.Itoa(rounds),
		"-duration", (5 * time.Second).String(), "-idle", "0", "-hapsuper", bin) // the idle part is not reported here
	cmd.Dir = filepath.Join(root, "bench")
	cmd.Stdout = io.MultiWriter(&buf, prefixed{out})
	cmd.Stderr = prefixed{out}
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("run bench/throughput: %w", err)
	}
	res := &throughputResult{rounds: rounds}
	for _, f := range []struct {
		re *regexp.Regexp
		v  *float64
	}{{tpBare, &res.bare}, {tpUnder, &res.under}, {tpRatio, &res.ratio}} {
		m := f.re.FindSubmatch(buf.Bytes())
		if m == nil {
			return nil, fmt.Errorf("read bench/throughput's summary: no %q in its output:\n%s", f.re, buf.String())
		}
		*f.v, _ = strconv.ParseFloat(string(m[1]), 64)
	}
	return res, nil
}

// prefixed indents what a sub-benchmark prints.
type prefixed struct{ w io.Writer }

func (p prefixed) Write(b []byte) (int, error) {
	lines := bytes.SplitAfter(b, []byte("\n"))
	for _, l := range lines {
		if len(l) == 0 {
			continue
		}
		if _, err := p.w.Write(append([]byte("  "), l...)); err != nil {
			return 0, err
		}
	}
	return len(b), nil
}
