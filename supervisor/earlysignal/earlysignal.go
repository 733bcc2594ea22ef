// Package earlysignal catches, from the first milliseconds of the process,
// the signals hapsuper's supervisor acts on, so that a stop signal that
// arrives while the settings are read, the routing client is built and
// HAProxy is probed is neither lost nor turned into the Go runtime's default
// (as PID 1 of a PID namespace the kernel drops a signal without a handler;
// past the runtime's start, SIGTERM ends the process with no log line).
//
// It must stay a leaf importing only os, os/signal and syscall: Go
// initialises packages in import-path order as soon as their imports are,
// so this init runs right after os/signal's, before the API schemes of
// client-go register and long before main (measured in docs/signals.md).
package earlysignal

import (
	"os"
	"os/signal"
	"syscall"
)

// Signals are caught from init on: those the supervisor acts on whatever its
// settings — the default stop signals SIGTERM and SIGUSR1, the hard stops
// SIGINT and SIGQUIT, the reloads SIGHUP and SIGUSR2, and SIGCHLD. A stop
// signal outside this set (--stop-signals SIGPWR) is caught once the
// settings are read.
var Signals = []os.Signal{
	syscall.SIGTERM, syscall.SIGUSR1, syscall.SIGINT, syscall.SIGQUIT,
	syscall.SIGHUP, syscall.SIGUSR2, syscall.SIGCHLD,
}

// caught buffers what arrives before the supervisor reads it; a signal that
// repeats before it is read is kept once (os/signal coalesces).
var caught = make(chan os.Signal, 32)

func init() {
	signal.Notify(caught, Signals...)
}

// Caught returns the channel that has received Signals since the process
// started. The supervisor reads it and adds its other stop signals to it
// with signal.Notify; it never stops it, so that a signal during the exit
// takes no default action.
func Caught() chan os.Signal {
	return caught
}

// Release gives Signals back to their default action, for a command that
// supervises nothing (status, version, help). A signal caught before is
// raised again, so that it acts as if it had never been caught: SIGTERM
// still ends the process.
func Release() {
	signal.Stop(caught)
	for {
		select {
		case sig := <-caught:
			_ = syscall.Kill(syscall.Getpid(), sig.(syscall.Signal))
		default:
			return
		}
	}
}
