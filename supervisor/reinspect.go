package supervisor

import (
	"slices"
	"strings"

	"github.com/hapsuper/hapsuper/conf"
)

// reinspect reads HAProxy's configuration again after a reload that
// landed and logs its warnings when they differ from those of the last
// reload: a controller (haproxy-ingress) starts HAProxy on a minimal
// configuration and writes the real one later, so what start inspected
// says nothing of the frontends clients reach. Only warnings: which
// frontends count as graceful in a drain stays what start inspected (a
// frontend added by a reload counts as not graceful, see poller.observe).
func (l *loop) reinspect() {
	files, err := l.settings.ConfigFiles()
	if err == nil {
		var insp conf.Inspection
		insp, err = conf.Inspect(files, l.settings)
		if err == nil {
			l.reloadWarnings(insp.Warnings)
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
