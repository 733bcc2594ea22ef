// Package check is hapsuper's preflight (`hapsuper check`): it looks at
// what a drain would be able to observe where hapsuper runs — the HAProxy
// version and configuration, the settings, the pod's identity, the grants
// of the routing mode, the paths that route to the pod and every node's
// kube-proxy — and says, row by row, OK, WARN or FAIL with the one thing
// to change.
//
// It judges with the code the drain uses (haproxy.Inspect, routing.SurveyPod,
// routing.PickMode, routing.ProbeKubeProxies), never a copy of it. It
// changes nothing: it reads the configuration, runs `haproxy -vv` and
// `haproxy -c` (haproxy.RunHAProxy), asks the apiserver through a client
// of its own built as `run` builds routing's (routing.RESTConfig,
// routing/kube; NewInput), and asks the nodes' healthz once. It must not
// write to the API or the files, nor start HAProxy to serve. Every API and
// healthz call and every HAProxy run is bounded by a timeout; an
// unreachable apiserver is a FAIL row.
package check

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// Status is a row's verdict.
type Status string

// The verdicts, from best to worst. Skip is a row that does not apply
// (routing off, no binary here): it counts as OK.
const (
	Skip Status = "SKIP"
	OK   Status = "OK"
	Warn Status = "WARN"
	Fail Status = "FAIL"
)

// Areas of the rows, in the order they are checked.
const (
	AreaConfig    = "config"
	AreaSettings  = "settings"
	AreaRouting   = "routing"
	AreaIdentity  = "identity"
	AreaGrants    = "grants"
	AreaPaths     = "paths"
	AreaKubeProxy = "kube-proxy"
)

// Row is one thing checked.
type Row struct {
	Area    string `json:"area"`
	Subject string `json:"subject"`
	Status  Status `json:"status"`
	Detail  string `json:"detail"`        // what was seen
	Fix     string `json:"fix,omitempty"` // the one thing to change; empty when OK
}

// Report is every row of one check.
type Report struct {
	Rows []Row `json:"rows"`
}

func (r *Report) add(area, subject string, st Status, detail, fix string) {
	r.Rows = append(r.Rows, Row{Area: area, Subject: subject, Status: st, Detail: detail, Fix: fix})
}

// Status is the worst verdict of the rows: OK when there is none.
func (r Report) Status() Status {
	worst := OK
	for _, row := range r.Rows {
		switch {
		case row.Status == Fail:
			return Fail
		case row.Status == Warn:
			worst = Warn
		}
	}
	return worst
}

// The exit codes of a report. 2 is not among them: every hapsuper command
// exits 2 for a command line it cannot read, before any check runs.
const (
	ExitOK       = 0
	ExitWarnings = 1
	ExitFailures = 3
)

// ExitCode is ExitOK when every row is OK (or skipped), ExitWarnings with
// warnings, ExitFailures with failures.
func (r Report) ExitCode() int {
	switch r.Status() {
	case Fail:
		return ExitFailures
	case Warn:
		return ExitWarnings
	}
	return ExitOK
}

// count returns how many rows have status st.
func (r Report) count(st Status) int {
	n := 0
	for _, row := range r.Rows {
		if row.Status == st {
			n++
		}
	}
	return n
}

// WriteJSON writes the report for machines: the rows, the overall status
// and the exit code.
func (r Report) WriteJSON(w io.Writer) error {
	rows := r.Rows
	if rows == nil {
		rows = []Row{}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(struct {
		Status Status `json:"status"`
		Exit   int    `json:"exit"`
		Rows   []Row  `json:"rows"`
	}{r.Status(), r.ExitCode(), rows})
}

// WriteText writes the report as a table for a person: one line per row,
// the fix on the line below, and a summary.
func (r Report) WriteText(w io.Writer) error {
	subjectWidth := len("SUBJECT")
	for _, row := range r.Rows {
		subjectWidth = max(subjectWidth, min(len(row.Subject), 40))
	}
	line := func(st, area, subject, detail string) string {
		return fmt.Sprintf("%-4s  %-10s  %-*s  %s", st, area, subjectWidth, subject, detail)
	}
	var b strings.Builder
	b.WriteString(strings.TrimRight(line("", "AREA", "SUBJECT", "DETAIL"), " ") + "\n")
	indent := strings.Repeat(" ", 4+2+10+2+subjectWidth+2)
	for _, row := range r.Rows {
		b.WriteString(line(string(row.Status), row.Area, row.Subject, row.Detail) + "\n")
		if row.Fix != "" {
			b.WriteString(indent + "fix: " + row.Fix + "\n")
		}
	}
	fmt.Fprintf(&b, "\n%s: %d OK, %d skipped, %d %s, %d %s (exit %d)\n", r.Status(),
		r.count(OK), r.count(Skip), r.count(Warn), plural(r.count(Warn), "warning"), r.count(Fail), plural(r.count(Fail), "failure"), r.ExitCode())
	_, err := io.WriteString(w, b.String())
	return err
}

func plural(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}
