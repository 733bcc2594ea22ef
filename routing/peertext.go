package routing

import (
	"strings"
	"unicode/utf8"

	"github.com/hapsuper/hapsuper/routing/judge"
)

// What a node's port sends is quoted into errors, and errors into the
// verdict's detail, the log, the status reply and the drain's Event:
// those must stay short whatever the node sends. (runtimeapi bounds the
// master CLI's text the same way; routing does not import it.)

// maxQuoted bounds what an error quotes of a node's answer, as runtimeapi
// bounds what it quotes of HAProxy's.
const maxQuoted = 200

// clipPeer cuts s to at most maxQuoted bytes on a rune boundary, marking
// the cut; bytes that are not UTF-8 become U+FFFD.
func clipPeer(s string) string {
	if len(s) <= maxQuoted && utf8.ValidString(s) {
		return s
	}
	c := judge.CutRunes(strings.ToValidUTF8(judge.CutRunes(s, maxQuoted), "\uFFFD"), maxQuoted)
	if len(s) > maxQuoted {
		c += "..."
	}
	return c
}

// clippedError is a failure whose text quotes a node's answer, cut to
// maxQuoted bytes (net/http's parser quotes the whole status or header
// line: a 79 KB status line made a 316 KB error). errors.Is and As still
// see the failure.
type clippedError struct {
	msg string
	err error
}

func (e *clippedError) Error() string { return e.msg }
func (e *clippedError) Unwrap() error { return e.err }

func clipError(err error) error {
	if msg := err.Error(); len(msg) > maxQuoted {
		return &clippedError{msg: clipPeer(msg), err: err}
	}
	return err
}
