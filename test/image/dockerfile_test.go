// Package image_test checks the Dockerfile at the root of the module:
// BuildKit's own parser reads it, the tests check what the image will run
// against conf's defaults, run_test.go runs the same command line against
// the HAProxy installed on this machine, and archive_test.go reads back the
// image that hack/image.sh built from it (buildah, stand-in bases) as an
// OCI archive.
//
// It must not build an image nor need a registry: no registry is reachable
// here. What it cannot see is that the pinned base tags exist.
package image_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/moby/buildkit/frontend/dockerfile/instructions"
	"github.com/moby/buildkit/frontend/dockerfile/linter"
	"github.com/moby/buildkit/frontend/dockerfile/parser"
	"github.com/moby/buildkit/frontend/dockerfile/shell"

	"github.com/hapsuper/hapsuper/conf"
)

// root is the module root, where the Dockerfile and .dockerignore are.
const root = "../.."

// binaryPath is where the image puts hapsuper.
const binaryPath = "/usr/local/bin/hapsuper"

// image is what the final stage of the Dockerfile sets, ARGs expanded.
type image struct {
	base       string
	copies     []*instructions.CopyCommand
	runs       []run // RUN instructions of the final stage, in order
	user       string
	stopSignal string
	entrypoint []string
	entryShell bool // shell form (wrapped in /bin/sh -c)
	cmd        []string
	cmdShell   bool
	buildBase  []string            // the other stages' bases, the sidecar's left out
	sidecar    *instructions.Stage // the stage named sidecar (hapsuper alone); nil without one
}

// run is one RUN and the USER it runs as.
type run struct {
	user    string
	command string
}

// loadImage parses the Dockerfile with BuildKit's parser and linter; any
// lint warning fails the test.
func loadImage(t *testing.T) image {
	t.Helper()
	f, err := os.Open(filepath.Join(root, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	res, err := parser.Parse(f)
	if err != nil {
		t.Fatalf("parse Dockerfile: %v", err)
	}
	for _, w := range res.Warnings {
		t.Errorf("Dockerfile parser warning: %s (line %d)", w.Short, w.Location.Start.Line)
	}
	lint := linter.New(&linter.Config{Warn: func(rule, _, _, msg string, loc []parser.Range) {
		t.Errorf("Dockerfile lint %s: %s (%v)", rule, msg, loc)
	}})
	stages, metaArgs, err := instructions.Parse(res.AST, lint)
	if err != nil {
		t.Fatalf("parse Dockerfile instructions: %v", err)
	}
	if len(stages) < 2 {
		t.Fatalf("Dockerfile has %d stages, want a build stage and a final one", len(stages))
	}
	var env []string
	for _, a := range metaArgs {
		for _, kv := range a.Args {
			env = append(env, kv.Key+"="+kv.ValueString())
		}
	}
	lex := shell.NewLex(res.EscapeToken)
	expand := func(w string) string {
		out, _, err := lex.ProcessWord(w, shell.EnvsFromSlice(env))
		if err != nil {
			t.Fatalf("expand %q in Dockerfile: %v", w, err)
		}
		return out
	}
	var img image
	for i, s := range stages[:len(stages)-1] {
		if s.Name == sidecarStage {
			img.sidecar = &stages[i]
			continue
		}
		img.buildBase = append(img.buildBase, expand(s.BaseName))
	}
	final := stages[len(stages)-1]
	img.base = expand(final.BaseName)
	user := "(base image's)"
	for _, c := range final.Commands {
		switch c := c.(type) {
		case *instructions.CopyCommand:
			img.copies = append(img.copies, c)
		case *instructions.UserCommand:
			user = c.User
			img.user = c.User
		case *instructions.RunCommand:
			img.runs = append(img.runs, run{user: user, command: strings.Join(c.CmdLine, " ")})
		case *instructions.StopSignalCommand:
			img.stopSignal = c.Signal
		case *instructions.EntrypointCommand:
			img.entrypoint, img.entryShell = c.CmdLine, c.PrependShell
		case *instructions.CmdCommand:
			img.cmd, img.cmdShell = c.CmdLine, c.PrependShell
		}
	}
	return img
}

// runDir is the directory of hapsuper's default sockets and override file.
func runDir(t *testing.T) string {
	t.Helper()
	s, err := conf.Parse(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Dir(s.MasterSocket)
	for _, p := range []string{s.StatusSocket, s.OverrideFile} {
		if filepath.Dir(p) != dir {
			t.Fatalf("conf's defaults use two directories, %s and %s: the image creates one", dir, filepath.Dir(p))
		}
	}
	return dir
}

// runDirCommand is the RUN that creates the run directory.
func runDirCommand(t *testing.T, img image) run {
	t.Helper()
	dir := runDir(t)
	for _, r := range img.runs {
		if slices.Contains(strings.Fields(r.command), dir) {
			return r
		}
	}
	t.Fatalf("no RUN in the final stage creates %s (conf's default socket directory)", dir)
	return run{}
}

var exactTag = regexp.MustCompile(`^[a-z0-9./-]+:\d+\.\d+\.\d+(-[a-z0-9.]+)?(@sha256:[0-9a-f]{64})?$`)

func TestDockerfileBases(t *testing.T) {
	img := loadImage(t)
	if !strings.HasPrefix(img.base, "haproxy:") || !exactTag.MatchString(img.base) {
		t.Errorf("final stage FROM %q: want the official haproxy image pinned to an exact release (haproxy:X.Y.Z)", img.base)
	}
	for _, b := range img.buildBase {
		if !exactTag.MatchString(b) {
			t.Errorf("build stage FROM %q: want an exact release tag", b)
		}
	}
	t.Logf("final stage: %s; build stages: %v", img.base, img.buildBase)
}

func TestDockerfileCommand(t *testing.T) {
	img := loadImage(t)
	if img.entryShell || len(img.entrypoint) != 2 || img.entrypoint[0] != binaryPath || img.entrypoint[1] != "--" {
		t.Errorf("ENTRYPOINT %q (shell form %v): want exec form [%q \"--\"]", img.entrypoint, img.entryShell, binaryPath)
	}
	if img.cmdShell || !slices.Equal(img.cmd, conf.DefaultHAProxy) {
		t.Errorf("CMD %q (shell form %v): want exec form %q, conf.DefaultHAProxy", img.cmd, img.cmdShell, conf.DefaultHAProxy)
	}
	copied := false
	for _, c := range img.copies {
		if c.From != "" && c.DestPath == binaryPath {
			copied = true
		}
	}
	if !copied {
		t.Errorf("no COPY --from=<build stage> puts hapsuper at %s", binaryPath)
	}
}

// The image's STOPSIGNAL must start a drain with hapsuper's defaults:
// `docker stop` and a kubelet honouring it must not hard-stop HAProxy.
func TestDockerfileStopSignal(t *testing.T) {
	img := loadImage(t)
	sig, err := conf.ParseSignal(img.stopSignal)
	if err != nil {
		t.Fatalf("STOPSIGNAL %q: %v", img.stopSignal, err)
	}
	s, err := conf.Parse(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(s.StopSignals, sig) {
		t.Errorf("STOPSIGNAL %s is not among hapsuper's default stop signals %v: it would not start a drain", img.stopSignal, s.StopSignals)
	}
}

// The final stage runs as the base image's unprivileged user, and the run
// directory is made as root for that user, private to it.
func TestDockerfileUserAndRunDir(t *testing.T) {
	img := loadImage(t)
	if img.user != "haproxy" {
		t.Errorf("final USER %q, want haproxy (the official image's)", img.user)
	}
	r := runDirCommand(t, img)
	if r.user != "root" {
		t.Errorf("RUN %q runs as USER %s: only root can create it under /var/run", r.command, r.user)
	}
	f := strings.Fields(r.command)
	for _, want := range [][]string{{"install", "-d"}, {"-o", "haproxy"}, {"-g", "haproxy"}, {"-m", "0700"}} {
		if !containsRun(f, want) {
			t.Errorf("RUN %q: want %q", r.command, strings.Join(want, " "))
		}
	}
}

func containsRun(fields, want []string) bool {
	for i := range fields {
		if i+len(want) <= len(fields) && slices.Equal(fields[i:i+len(want)], want) {
			return true
		}
	}
	return false
}

// sidecarStage is the Dockerfile's second target: hapsuper alone.
const sidecarStage = "sidecar"

// The sidecar target is hapsuper alone (FROM scratch, the build stage's
// binary at the same path), runs as a user that is not root by number (the
// kubelet checks runAsNonRoot only against a numeric USER), the official
// image's uid 99 so that both containers reach the shared sockets, and its
// ENTRYPOINT is `hapsuper sidecar`.
func TestDockerfileSidecarStage(t *testing.T) {
	img := loadImage(t)
	st := img.sidecar
	if st == nil {
		t.Fatalf("no stage named %q: docs/sidecar.md builds the sidecar's image with --target %s", sidecarStage, sidecarStage)
	}
	if st.BaseName != "scratch" {
		t.Errorf("sidecar stage FROM %q: want scratch (a static binary needs nothing else)", st.BaseName)
	}
	var copied bool
	var user string
	var entry []string
	for _, c := range st.Commands {
		switch c := c.(type) {
		case *instructions.CopyCommand:
			if c.DestPath == binaryPath {
				copied = c.From != ""
			}
		case *instructions.UserCommand:
			user = c.User
		case *instructions.EntrypointCommand:
			if !c.PrependShell {
				entry = c.CmdLine
			}
		}
	}
	if !copied {
		t.Errorf("sidecar stage: no COPY --from=<build stage> puts hapsuper at %s", binaryPath)
	}
	if user != "99:99" {
		t.Errorf("sidecar stage USER %q: want 99:99, the official haproxy image's uid and gid, by number", user)
	}
	if !slices.Equal(entry, []string{binaryPath, "sidecar"}) {
		t.Errorf("sidecar stage ENTRYPOINT %q: want [%s sidecar] in exec form", entry, binaryPath)
	}
}
