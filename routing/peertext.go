package routing

import (
	"fmt"
	"strings"
	"unicode/utf8"
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
	c := cutRunes(strings.ToValidUTF8(cutRunes(s, maxQuoted), "\uFFFD"), maxQuoted)
	if len(s) > maxQuoted {
		c += "..."
	}
	return c
}

// maxDetail bounds the verdict's detail. It names at most maxNamed paths
// and nodes, each with an error of at most maxQuoted bytes of the node's
// text, so 4 KiB holds any detail but one built of the longest names the
// API allows.
const maxDetail = 4 << 10

// boundDetail cuts d to maxDetail bytes on a rune boundary and says how
// many bytes were cut.
func boundDetail(d string) string {
	if len(d) <= maxDetail {
		return d
	}
	// The mark's length depends on the count: reserve the longest.
	kept := cutRunes(d, maxDetail-len(fmt.Sprintf("… (%d more bytes)", len(d))))
	return fmt.Sprintf("%s… (%d more bytes)", kept, len(d)-len(kept))
}

// cutRunes is s cut to at most n bytes, not inside a UTF-8 sequence.
func cutRunes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
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
