package supervisor

import (
	"context"
	"io"
	"log/slog"
)

// newCompanionRelay carries the companion's stdout and stderr, one pipe
// for every start of it, into hapsuper's log as HAProxy's stderr is
// carried (stderrRelay): lines as they are to raw (text logs), else
// records with source=companion, so that a JSON log holds nothing else.
// The caller keeps the write end open for the restarts and closes it when
// the loop has ended.
func newCompanionRelay(raw io.Writer, log *slog.Logger) (*stderrRelay, error) {
	r, err := newStderrRelay(raw, log)
	if err != nil {
		return nil, err
	}
	r.log = log.With("source", "companion")
	r.record = func(line []byte) {
		r.log.LogAttrs(context.Background(), slog.LevelInfo, "companion", slog.String("line", string(line)))
	}
	return r, nil
}
