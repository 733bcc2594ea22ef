package metrics

import (
	"io"
	"math"
	"strconv"
	"strings"
)

// exposition writes metric families in Prometheus' text format 0.0.4: per
// family a HELP and a TYPE line, then one line per sample. hapsuper writes
// it itself rather than link client_golang: the library (its registry,
// protobuf model and collectors) kept 1.4–2.1 MB more of the binary resident in
// PID 1 for the pod's whole life (measured side by side, docs/benchmark-history.md), for a
// handful of values computed at scrape time.
type exposition struct {
	b strings.Builder
}

// family starts a family; name is the full metric name, kind one of gauge,
// counter, histogram.
func (e *exposition) family(name, kind, help string) {
	e.b.WriteString("# HELP ")
	e.b.WriteString(name)
	e.b.WriteByte(' ')
	e.b.WriteString(helpEscaper.Replace(help))
	e.b.WriteString("\n# TYPE ")
	e.b.WriteString(name)
	e.b.WriteByte(' ')
	e.b.WriteString(kind)
	e.b.WriteByte('\n')
}

// sample writes one sample; labels are name, value pairs.
func (e *exposition) sample(name string, v float64, labels ...string) {
	e.b.WriteString(name)
	if len(labels) > 0 {
		e.b.WriteByte('{')
		for i := 0; i+1 < len(labels); i += 2 {
			if i > 0 {
				e.b.WriteByte(',')
			}
			e.b.WriteString(labels[i])
			e.b.WriteString(`="`)
			e.b.WriteString(labelEscaper.Replace(labels[i+1]))
			e.b.WriteByte('"')
		}
		e.b.WriteByte('}')
	}
	e.b.WriteByte(' ')
	e.b.WriteString(formatValue(v))
	e.b.WriteByte('\n')
}

// one writes a family of a single unlabelled sample.
func (e *exposition) one(name, kind, help string, v float64) {
	e.family(name, kind, help)
	e.sample(name, v)
}

func (e *exposition) writeTo(w io.Writer) error {
	_, err := io.WriteString(w, e.b.String())
	return err
}

var (
	labelEscaper = strings.NewReplacer(`\`, `\\`, "\n", `\n`, `"`, `\"`)
	helpEscaper  = strings.NewReplacer(`\`, `\\`, "\n", `\n`)
)

// formatValue formats as Prometheus' parsers read: the shortest exact
// decimal, and +Inf, -Inf, NaN spelled as the format says.
func formatValue(v float64) string {
	switch {
	case math.IsInf(v, 1):
		return "+Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	case math.IsNaN(v):
		return "NaN"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}
