package supervisor

import (
	"context"
	"io"
	"log/slog"
)

// companionShare is a log output with a share of its own for the
// companion's lines (cmd/hapsuper's logSink): a companion that floods its
// output has its own lines dropped first, never hapsuper's.
type companionShare interface{ Companion() io.Writer }

// newCompanionRelay carries the companion's stdout and stderr, one pipe
// for every start of it, into hapsuper's log output out as HAProxy's
// stderr is carried (stderrRelay): lines as they are (text logs), else,
// with json, records with source=companion, so that a JSON log holds
// nothing else. When out has a share for the companion, its lines go
// there. log is hapsuper's logger: its level decides whether the
// companion's records are written. The caller keeps the write end open
// for the restarts and closes it when the loop has ended.
func newCompanionRelay(out io.Writer, json bool, log *slog.Logger) (*stderrRelay, error) {
	records := log
	if cs, ok := out.(companionShare); ok {
		out = cs.Companion()
		records = slog.New(slog.NewJSONHandler(out, nil))
	}
	raw := out
	if json {
		raw = nil
	}
	r, err := newStderrRelay(raw, log)
	if err != nil {
		return nil, err
	}
	r.log = records.With("source", "companion")
	r.record = func(line []byte) {
		if log.Enabled(context.Background(), slog.LevelInfo) {
			r.log.LogAttrs(context.Background(), slog.LevelInfo, "companion", slog.String("line", string(line)))
		}
	}
	return r, nil
}
