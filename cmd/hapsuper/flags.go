package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/hapsuper/hapsuper/conf"
)

// writeFlags writes flags for a terminal: a line with the name, the
// variable and the default, then the meaning indented.
func writeFlags(w io.Writer, flags []conf.Flag) {
	for _, f := range flags {
		var notes []string
		if f.Env != "" {
			notes = append(notes, f.Env)
		}
		if !f.Bool {
			notes = append(notes, "default "+f.DefaultText())
		}
		line := "  --" + f.Name
		if len(notes) > 0 {
			line += " (" + strings.Join(notes, ", ") + ")"
		}
		fmt.Fprintf(w, "%s\n        %s\n", line, f.Meaning)
	}
}
