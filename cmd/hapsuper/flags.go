package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/hapsuper/hapsuper/conf"
)

// writeFlags writes flags for a terminal: a heading for each group (what
// its flags are for, conf.RunGroups), then per flag a line with the name,
// the variable and the default, and the meaning indented.
func writeFlags(w io.Writer, flags []conf.Flag) {
	group := ""
	for _, f := range flags {
		if f.Group != group && f.Group != "" {
			fmt.Fprintf(w, " %s:\n", f.Group)
		}
		group = f.Group
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
