package judge

import (
	"fmt"
	"unicode/utf8"
)

// MaxDetail bounds the verdict's detail. It names at most maxNamed paths
// and nodes, each with an error of at most maxQuoted bytes of the node's
// text, so 4 KiB holds any detail but one built of the longest names the
// API allows.
const MaxDetail = 4 << 10

// boundDetail cuts d to MaxDetail bytes on a rune boundary and says how
// many bytes were cut.
func boundDetail(d string) string {
	if len(d) <= MaxDetail {
		return d
	}
	// The mark's length depends on the count: reserve the longest.
	kept := CutRunes(d, MaxDetail-len(fmt.Sprintf("… (%d more bytes)", len(d))))
	return fmt.Sprintf("%s… (%d more bytes)", kept, len(d)-len(kept))
}

// CutRunes is s cut to at most n bytes, not inside a UTF-8 sequence.
func CutRunes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
