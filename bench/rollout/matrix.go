package main

import (
	"context"
	"fmt"
	"time"
)

// config is a client pattern and kube-proxy state: a cell without its
// strategy.
type config struct {
	pat    pattern
	frozen bool
}

// configs lists every pattern with kube-proxy frozen first: the hardest
// cells, so that a failing sleep candidate fails early.
func configs(pats []pattern, frozen, live bool) []config {
	var out []config
	if frozen {
		for _, p := range pats {
			out = append(out, config{p, true})
		}
	}
	if live {
		for _, p := range pats {
			out = append(out, config{p, false})
		}
	}
	return out
}

// searchResult is one sleep-N candidate of the search.
type searchResult struct {
	sleep    time.Duration
	cells    int    // cells run
	failures int    // failures in them
	first    string // first cell with failures, if any
}

func (s searchResult) passed() bool { return s.failures == 0 }

// matrix is everything the rollout part measured.
type matrix struct {
	cells  []cellResult
	search []searchResult
	sleepN time.Duration // 0: no candidate had 0 failures
}

// runMatrix runs the rollouts: the sleep candidates below 5 s (each
// stopping at its first cell with failures), immediate, sleep-5s, the
// candidates above 5 s while none has passed, quiet, hapsuper.
func (r *runner) runMatrix(ctx context.Context) (*matrix, error) {
	cfgs := configs(r.opts.patterns, r.opts.frozen, r.opts.live)
	m := &matrix{}
	var queue []strategy // strategies still to run, for chaining replacements
	nextAfter := func(i int, cs []config, s strategy) strategy {
		if i+1 < len(cs) {
			return s
		}
		if len(queue) > 0 {
			return queue[0]
		}
		return s
	}
	run := func(s strategy, failFast bool) (searchResult, error) {
		cells := make([]cell, len(cfgs))
		for i, cf := range cfgs {
			cells[i] = cell{strat: s, pat: cf.pat, frozen: cf.frozen}
		}
		return r.runCells(cells, failFast, func(i int, c cell) (cellResult, error) {
			return r.runCell(ctx, c, nextAfter(i, cfgs, s))
		}, func(res cellResult) { m.cells = append(m.cells, res) })
	}

	var below, above []time.Duration
	for _, d := range r.opts.candidates {
		switch {
		case d < 5*time.Second:
			below = append(below, d)
		case d > 5*time.Second:
			above = append(above, d)
		}
	}
	for _, d := range below {
		queue = append(queue, sleepFor(d))
	}
	queue = append(queue, r.opts.strategies...)
	for len(queue) > 0 {
		s := queue[0]
		queue = queue[1:]
		if s.kind == stratSleep && s.sleep < 5*time.Second && m.sleepN != 0 && s.sleep > m.sleepN {
			continue // a shorter candidate already passed
		}
		searching := len(r.opts.candidates) > 0
		failFast := searching && s.kind == stratSleep && s.sleep != 5*time.Second
		if failFast {
			r.printf("strategy %s (sleep-N candidate: stops at its first cell with failures)\n", s.name)
		} else {
			r.printf("strategy %s\n", s.name)
		}
		sr, err := run(s, failFast)
		if err != nil {
			return m, err
		}
		if s.kind != stratSleep || !searching {
			continue
		}
		m.search = append(m.search, sr)
		if sr.passed() && (m.sleepN == 0 || s.sleep < m.sleepN) {
			m.sleepN = s.sleep
		}
		// Past 5 s, the longer candidates run one at a time while none passed.
		if s.sleep >= 5*time.Second && m.sleepN == 0 && len(above) > 0 {
			queue = append([]strategy{sleepFor(above[0])}, queue...)
			above = above[1:]
		}
	}
	return m, nil
}

// progress prints one finished cell.
func (r *runner) progress(res cellResult, took time.Duration) {
	var drains []time.Duration
	for _, p := range res.pods {
		drains = append(drains, p.drain())
	}
	r.printf("  %-46s %5d requests, %4d failed %v, drain %s, %s\n",
		res.cell.String(), len(res.outcomes), res.failed(), res.failures(), durs(drains), took.Round(100*time.Millisecond))
	if r.opts.verbose {
		for _, p := range res.pods {
			r.printf("    %v\n", p)
		}
	}
}

// runCells runs cells, all of one strategy, in order with run, hands each
// result to keep and prints it, and counts the failures; failFast stops at
// the first cell with one (a sleep-N candidate that failed is done).
func (r *runner) runCells(cells []cell, failFast bool, run func(int, cell) (cellResult, error), keep func(cellResult)) (searchResult, error) {
	var sr searchResult
	if len(cells) > 0 {
		sr.sleep = cells[0].strat.sleep
	}
	for i, c := range cells {
		began := time.Now()
		res, err := run(i, c)
		if err != nil {
			return sr, fmt.Errorf("rollout %v: %w", c, err)
		}
		keep(res)
		r.progress(res, time.Since(began))
		sr.cells++
		if f := res.failed(); f > 0 {
			sr.failures += f
			if sr.first == "" {
				sr.first = c.String()
			}
			if failFast {
				return sr, nil
			}
		}
	}
	return sr, nil
}
