package runtimeapi

import (
	"fmt"
	"strconv"
	"strings"
)

// noTargetPrefix starts the master's answer to `@!<pid>` when it knows no
// such process. It is not followed by an empty line and ends the reply.
const noTargetPrefix = "Can't find the target PID matching the prefix '"

// unreachablePrefix starts the master's answer when it cannot talk to the
// target worker (it is exiting, or does not answer). Like noTargetPrefix it
// has no empty line and ends the reply.
const unreachablePrefix = "Can't connect to the target CLI!"

// errorPrefixes start outputs that are error answers. Parsers also reject
// any output they do not recognise, quoting its first line.
var errorPrefixes = []string{
	"Unknown command",
	noTargetPrefix,
	unreachablePrefix,
	"Permission denied",
}

// splitOutputs cuts a reply to a line of n commands into the n outputs, each
// without its terminating empty line. When the master stopped at a target it
// could not find or reach, it returns the outputs before it and an error
// wrapping ErrNoSuchProcess or ErrWorkerUnreachable; len(outputs) is then the
// index of that command. A reply
// that ends early is an error wrapping ErrPartialReply, a *closedBetweenError
// when it ended between two outputs.
func splitOutputs(reply string, n int) ([]string, error) {
	outputs := make([]string, 0, n)
	rest := reply
	for len(outputs) < n {
		for prefix, err := range map[string]error{noTargetPrefix: ErrNoSuchProcess, unreachablePrefix: ErrWorkerUnreachable} {
			if strings.HasPrefix(rest, prefix) {
				line, after, _ := strings.Cut(rest, "\n")
				if after != "" {
					return outputs, fmt.Errorf("unexpected data after %q: %q", firstLine(line), firstLine(after))
				}
				return outputs, fmt.Errorf("%w: %s", err, firstLine(line))
			}
		}
		if rest == "" {
			return outputs, &closedBetweenError{got: len(outputs), want: n}
		}
		if rest[0] == '\n' { // an empty output
			outputs = append(outputs, "")
			rest = rest[1:]
			continue
		}
		end := strings.Index(rest, "\n\n")
		if end < 0 {
			return outputs, fmt.Errorf("%w: output %d of %d has no terminating empty line (%d bytes: %q)", ErrPartialReply, len(outputs)+1, n, len(rest), firstLine(rest))
		}
		outputs = append(outputs, rest[:end+1])
		rest = rest[end+2:]
	}
	if rest != "" {
		return outputs, fmt.Errorf("unexpected data after %d outputs: %q", n, firstLine(rest))
	}
	return outputs, nil
}

// closedBetweenError is a partial reply that ended cleanly between two
// outputs: the master closed the connection before output got+1 began. The
// master does that when the target worker of that command is exiting.
type closedBetweenError struct{ got, want int }

func (e *closedBetweenError) Error() string {
	return fmt.Sprintf("%v: connection closed after %d of %d outputs", ErrPartialReply, e.got, e.want)
}

func (e *closedBetweenError) Unwrap() error { return ErrPartialReply }

// noTargetPID returns the pid named in a "Can't find the target PID" answer.
func noTargetPID(err error) (int, bool) {
	msg := err.Error()
	i := strings.Index(msg, "'@!")
	if i < 0 {
		return 0, false
	}
	digits, _, ok := strings.Cut(msg[i+3:], "'")
	if !ok {
		return 0, false
	}
	pid, perr := strconv.Atoi(digits)
	return pid, perr == nil
}

// answerError returns an error wrapping ErrCLI when output is an error answer.
func answerError(output string) error {
	for _, p := range errorPrefixes {
		if strings.HasPrefix(output, p) {
			return fmt.Errorf("%w: %s", ErrCLI, firstLine(output))
		}
	}
	return nil
}

// unexpected describes an output a parser does not recognise: an error
// answer if it is a known one, otherwise its first line quoted.
func unexpected(output, want string) error {
	if err := answerError(output); err != nil {
		return err
	}
	if output == "" {
		return fmt.Errorf("empty output, want %s", want)
	}
	return fmt.Errorf("%w: unexpected output %q, want %s", ErrCLI, firstLine(output), want)
}

// firstLine returns s up to its first newline, cut to maxQuoted bytes:
// what HAProxy sent is quoted into errors, the drain's detail and the
// status reply, so it must stay short whatever HAProxy (or whoever holds
// the socket) sends.
func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return clip(line)
}

// maxQuoted bounds what an error quotes of a reply.
const maxQuoted = 200

// clip cuts s to maxQuoted bytes, marking the cut.
func clip(s string) string {
	if len(s) > maxQuoted {
		return s[:maxQuoted] + "..."
	}
	return s
}
