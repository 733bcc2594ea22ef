package judge

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"
)

// boundDetail keeps a detail within MaxDetail, cut on a rune boundary with
// the count of what was cut, and leaves a short one alone.
func TestBoundDetail(t *testing.T) {
	if got := boundDetail("short"); got != "short" {
		t.Errorf("boundDetail(short) = %q", got)
	}
	for _, long := range []string{
		strings.Repeat("é", MaxDetail),       // 2-byte runes
		strings.Repeat("x", MaxDetail) + "€", // a 3-byte rune at the cut
		"x" + strings.Repeat("€", MaxDetail), // 3-byte runes, off by one
	} {
		got := boundDetail(long)
		if len(got) > MaxDetail || !utf8.ValidString(got) {
			t.Fatalf("%d bytes, valid UTF-8 %v; want at most %d", len(got), utf8.ValidString(got), MaxDetail)
		}
		var cut int
		if _, err := fmt.Sscanf(got[strings.LastIndex(got, "… (")+len("… ("):], "%d more bytes)", &cut); err != nil {
			t.Fatalf("no count of the cut in %q: %v", got[len(got)-40:], err)
		}
		if kept := strings.TrimSuffix(got[:strings.LastIndex(got, "… (")], ""); len(kept)+cut != len(long) || !strings.HasPrefix(long, kept) {
			t.Errorf("kept %d + cut %d bytes, want %d in all", len(kept), cut, len(long))
		}
	}
}

// clipPeer cuts on a rune boundary, never splitting a character.
