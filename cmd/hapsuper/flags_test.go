package main

import (
	"strings"
	"testing"

	"github.com/hapsuper/hapsuper/conf"
)

func TestWriteFlags(t *testing.T) {
	var b strings.Builder
	writeFlags(&b, []conf.Flag{
		{Name: "grace-period", Env: "HAPSUPER_GRACE_PERIOD", Default: "30s", Meaning: "the pod's grace"},
		{Name: "json", Bool: true, Default: "false", Meaning: "print JSON"},
		{Name: "kubeconfig", Meaning: "a kubeconfig"},
	})
	want := `  --grace-period (HAPSUPER_GRACE_PERIOD, default 30s)
        the pod's grace
  --json
        print JSON
  --kubeconfig (default none)
        a kubeconfig
`
	if b.String() != want {
		t.Errorf("writeFlags wrote\n%s\nwant\n%s", b.String(), want)
	}
}
