// Package haproxy is what hapsuper knows of HAProxy itself: the command it
// runs HAProxy with (Command, from the user's command and the settings), the
// configuration files that command loads and a read-only inspection of them
// (Inspect: frontends, how their soft stop ends connections, warnings that
// say what to change), the override file hapsuper writes and passes last
// (WriteOverride: hard-stop-after and the --lb-check-bind health check), the
// -m memory cap it adds (WithMemoryLimit, MemoryShare), the
// version facts and known regressions of HAProxy's releases, and running
// `haproxy -vv` or `haproxy -c` bounded by a timeout (RunHAProxy). The
// command line is read by its leaf package cmdline, which conf/ also uses.
//
// It must not rewrite, reformat or save the user's configuration (the parser
// reads only: rewriting breaks `.if` blocks), write any file but the
// override file, start HAProxy to serve (the supervisor does, and runs a
// reload's `haproxy -c` under its reaper: RunHAProxy waits for its child
// itself), log, exit or print: it returns values and errors that say what
// to change.
package haproxy
