package status

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/hapsuper/hapsuper/drain"
)

// timeFormat is RFC 3339 to the millisecond: the precision the drain's
// times mean anything at.
const timeFormat = "2006-01-02T15:04:05.000Z07:00"

// Render writes s for a person: phase, drain conditions, times left and
// workers. now is the reader's clock, for "ago" and "in".
func Render(w io.Writer, s Snapshot, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "phase:\t%s\n", s.Phase)
	fmt.Fprintf(tw, "master pid:\t%d\n", s.MasterPID)
	if s.Settings.Routing != "" {
		fmt.Fprintf(tw, "routing observation:\t%s\n", s.Settings.Routing)
	}
	if s.PollError != "" {
		fmt.Fprintf(tw, "master CLI:\tFAILING: %s\n", s.PollError)
	} else if !s.ObservedAt.IsZero() {
		fmt.Fprintf(tw, "master CLI:\tanswered %s\n", ago(now, s.ObservedAt))
	}
	if c := s.Companion; c != nil {
		fmt.Fprintf(tw, "companion:\t%s\n", companionLine(*c, now))
		if c.Failing != "" {
			fmt.Fprintf(tw, "companion FAILING:\t%s\n", c.Failing)
			for _, line := range c.Output {
				fmt.Fprintf(tw, "companion output:\t%s\n", line)
			}
		}
	}
	if r := s.Reloads.Last; r != nil {
		fmt.Fprintf(tw, "last reload:\t%s\n", reloadLine(*r, now))
		if r.Detail != "" {
			fmt.Fprintf(tw, "reload detail:\t%s\n", r.Detail)
		}
	}
	d := s.Drain
	if !d.StopRequested.IsZero() {
		fmt.Fprintf(tw, "drain started:\t%s (%s)\n", d.StopRequested.Format(timeFormat), ago(now, d.StopRequested))
		if s.Phase != drain.Exited { // past the exit, "in 6s" means nothing
			fmt.Fprintf(tw, "bound:\t%s\n", until(now, d.Bound))
			fmt.Fprintf(tw, "deadline:\t%s\n", until(now, d.Deadline))
		}
		for _, c := range d.Conditions {
			if t := c.Text(); c.Name == "routing" && (t == "off" || strings.HasPrefix(t, "off (")) {
				// Nothing to meet: routing is not observed, quiet decides.
				fmt.Fprintf(tw, "condition routing:\toff (not observed: the quiet period decides)\n")
				continue
			}
			fmt.Fprintf(tw, "condition %s:\t%s\n", c.Name, condition(c, now))
		}
		if !d.SoftStop.IsZero() {
			fmt.Fprintf(tw, "soft stop:\t%s after the stop request\n", d.SoftStop.Sub(d.StopRequested).Round(time.Millisecond))
		}
		if !d.Exited.IsZero() {
			fmt.Fprintf(tw, "exited:\t%s after the stop request\n", d.Exited.Sub(d.StopRequested).Round(time.Millisecond))
		}
		if d.Reason != drain.ReasonNone {
			fmt.Fprintf(tw, "reason:\t%s\n", d.Reason)
		}
		if d.Detail != "" {
			fmt.Fprintf(tw, "detail:\t%s\n", d.Detail)
		}
	}
	for _, r := range d.ReloadsAfterSoftStop {
		fmt.Fprintf(tw, "reload after soft stop:\tworker %d (%s) %s after the soft stop, by %s: %s\n",
			r.Worker, r.Via, time.Duration(r.AfterSoftStop).Round(time.Millisecond), r.By, r.Action)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	var sessions int64
	for _, wk := range s.Workers {
		sessions += wk.Sessions
	}
	fmt.Fprintf(w, "workers: %d, sessions: %d\n", len(s.Workers), sessions)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	// CONNS+REQS is what quiet counts before routing is withdrawn: new
	// connections plus requests of the counted frontends, so one request
	// on a new connection counts 2.
	fmt.Fprintln(tw, "  PID\tKIND\tSESSIONS\tCONNS+REQS")
	for _, wk := range s.Workers {
		kind := "current"
		if wk.Old {
			kind = "old"
		}
		fmt.Fprintf(tw, "  %d\t%s\t%d\t%d\n", wk.PID, kind, wk.Sessions, wk.Requests)
	}
	return tw.Flush()
}

// reloadLine is the last reload for a person: "failed 3s ago (SIGHUP);
// 2 ok, 0 refused, 1 failed since start" is written by the caller's totals.
func reloadLine(r Reload, now time.Time) string {
	line := fmt.Sprintf("%s %s (%s)", r.Result, ago(now, r.At), r.Origin)
	if r.Worker != 0 {
		line += fmt.Sprintf(", new worker %d", r.Worker)
	}
	return line
}

func condition(c Condition, now time.Time) string {
	var b strings.Builder
	if c.Met {
		b.WriteString("met")
	} else {
		b.WriteString("pending")
	}
	if !c.Since.IsZero() {
		fmt.Fprintf(&b, ", last change %s", ago(now, c.Since))
	}
	if t := c.Text(); t != "" {
		fmt.Fprintf(&b, " (%s)", t)
	}
	return b.String()
}

func ago(now, t time.Time) string {
	return now.Sub(t).Round(10*time.Millisecond).String() + " ago"
}

func until(now, t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	if d := t.Sub(now); d > 0 {
		return "in " + d.Round(10*time.Millisecond).String()
	}
	return "passed " + ago(now, t)
}
