// Package conf holds hapsuper's settings: the `run` command's flags and their
// environment variables (HAPSUPER_<FLAG>, a flag wins over its variable),
// their validation, and the values derived from them (the max wait, the
// withdrawn quiet period). The flag definitions are the one source of the
// flags' help, the README's flag table (TestREADMEFlagTable) and the
// defaults; what each flag is for and how they constrain each other is in
// docs/settings.md. Of HAProxy's command it reads only the -S, with
// haproxy/cmdline, to take the master socket from it.
//
// It must not read or write files, start processes, exit or print, or hold
// what is about HAProxy itself (its command line, configuration, override
// file and versions are haproxy/'s): it returns values and errors that say
// what to change.
package conf
