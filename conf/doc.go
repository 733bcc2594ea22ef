// Package conf holds hapsuper's settings: the `run` command's flags and their
// environment variables (HAPSUPER_<FLAG>, a flag wins over its variable), the
// HAProxy command line built from them, a read-only inspection of the user's
// HAProxy configuration, and the override file that bounds every soft stop.
// The flag definitions are the one source of the flags' help, the README's
// flag table (TestREADMEFlagTable) and the defaults; what each flag is for
// and how they constrain each other is in docs/settings.md.
//
// It must not rewrite, reformat or save the user's HAProxy configuration (the
// parser is used to read only: rewriting breaks `.if` blocks), must not exit or
// print, and must not start processes: it returns values and errors that say
// what to change.
package conf
