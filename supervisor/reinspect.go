package supervisor

import (
	"slices"
	"strings"
	"sync/atomic"

	"github.com/hapsuper/hapsuper/haproxy"
)

// reinspect reads HAProxy's configuration again after a reload that
// landed: a controller (haproxy-ingress) starts HAProxy on a minimal
// configuration and writes the real one later, so what start inspected
// says nothing of the frontends clients reach. It logs the warnings when
// they differ from those of the last reload, and hands the poller the
// frontends whose soft stop is graceful now (their kept-alive requests are
// then no new connections once routing is withdrawn). A frontend's name
// stands for the old workers' copy of it too: the latest configuration
// decides for both. A configuration that cannot be read leaves the last
// set as it was.
func (l *loop) reinspect() {
	files, err := haproxy.ConfigFiles(l.settings)
	if err == nil {
		var insp haproxy.Inspection
		insp, err = haproxy.Inspect(files, l.settings)
		if err == nil {
			l.reloadWarnings(insp.Warnings)
			if l.graceful != nil {
				l.graceful.store(gracefulFrontends(insp))
			}
			return
		}
	}
	l.log.Warn("configuration after the reload not inspected", "err", err)
}

// reloadWarnings logs warnings unless they are the last reload's.
func (l *loop) reloadWarnings(warnings []string) {
	sorted := slices.Sorted(slices.Values(warnings))
	key := strings.Join(sorted, "\n")
	if l.reloads.inspected && key == l.reloads.warnings {
		return
	}
	l.reloads.inspected, l.reloads.warnings = true, key
	for _, w := range sorted {
		l.log.Warn("config warning", "warning", w, "after", "reload")
	}
}

// frontendSet is a set of frontend names that the loop replaces and the
// poller reads, each from its own goroutine; nil or empty: none.
type frontendSet struct {
	p atomic.Pointer[map[string]bool]
}

func newFrontendSet(m map[string]bool) *frontendSet {
	s := &frontendSet{}
	s.store(m)
	return s
}

func (s *frontendSet) store(m map[string]bool) { s.p.Store(&m) }

// load returns the set; a nil set is empty (reading a nil map is).
func (s *frontendSet) load() map[string]bool {
	if s == nil {
		return nil
	}
	if m := s.p.Load(); m != nil {
		return *m
	}
	return nil
}
