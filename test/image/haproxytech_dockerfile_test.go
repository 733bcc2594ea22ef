package image_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/moby/buildkit/frontend/dockerfile/instructions"
	"github.com/moby/buildkit/frontend/dockerfile/linter"
	"github.com/moby/buildkit/frontend/dockerfile/parser"
	"github.com/moby/buildkit/frontend/dockerfile/shell"

	"github.com/hapsuper/hapsuper/conf"
	"github.com/hapsuper/hapsuper/haproxy"
)

// dropIn is a Dockerfile of deploy/ that puts hapsuper into a controller's
// image, and what that image's own PID 1 ran (its gopherd.yml or s6 run
// script, read 2026-12-04).
type dropIn struct {
	path       string
	modeFlag   string // the controller's first argument
	wrapper    string // HAProxy's binary
	configs    []string
	createdAux string // the -f file the image's PID 1 created when missing; "" when the image holds it
	gopherdDir string // where the image's controller finds gopherd in PATH
	controller string // the controller's program in the image
	chartArgs  []string
}

var dropIns = []dropIn{
	{
		path: "deploy/haproxytech-ingress/Dockerfile", modeFlag: "--with-s6-overlay",
		wrapper: "/usr/local/sbin/haproxy_wrapper", configs: []string{"/etc/haproxy/haproxy.cfg", "/etc/haproxy/haproxy-aux.cfg"},
		createdAux: "/etc/haproxy/haproxy-aux.cfg", gopherdDir: "/usr/local/bin",
		controller: "/haproxy-ingress-controller",
		// kubernetes-ingress chart 1.52.1's args for a Deployment with its
		// default values, release haproxy-kubernetes-ingress in namespace
		// haproxy-controller.
		chartArgs: []string{
			"--default-ssl-certificate=haproxy-controller/haproxy-kubernetes-ingress-default-cert",
			"--configmap=haproxy-controller/haproxy-kubernetes-ingress",
			"--http-bind-port=8080",
			"--https-bind-port=8443",
			"--ingress.class=haproxy",
			"--prometheus",
		},
	},
	{
		path: "deploy/haproxy-unified-gateway/Dockerfile", modeFlag: "--with-gopherd",
		wrapper: "/usr/local/sbin/haproxy_wrapper", configs: []string{"/usr/local/hug/haproxy.cfg", "/usr/local/hug/aux"},
		gopherdDir: "/usr/local/sbin",
		controller: "/usr/local/sbin/hug",
		// haproxy-unified-gateway chart 1.1.0's args with hugconf.create,
		// release haproxy-unified-gateway in its namespace.
		chartArgs: []string{"--hugconf-crd=haproxy-unified-gateway/hugconf"},
	},
}

// controllerMasterSocket is the master socket both controllers reload
// through, hard-coded in them (kubernetes-ingress
// pkg/haproxy/process/interface.go).
const controllerMasterSocket = "/var/run/haproxy-master.sock"

// dropInImage is what a drop-in's final stage sets.
type dropInImage struct {
	image
	env map[string]string
}

// loadDropIn parses a drop-in Dockerfile as loadImage parses the root one,
// with its final stage's ENV; any lint warning fails the test.
func loadDropIn(t *testing.T, path string) dropInImage {
	t.Helper()
	f, err := os.Open(filepath.Join(root, path))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	res, err := parser.Parse(f)
	if err != nil {
		t.Fatalf("parse %s: %v", path, err)
	}
	for _, w := range res.Warnings {
		t.Errorf("%s parser warning: %s (line %d)", path, w.Short, w.Location.Start.Line)
	}
	lint := linter.New(&linter.Config{Warn: func(rule, _, _, msg string, loc []parser.Range) {
		t.Errorf("%s lint %s: %s (%v)", path, rule, msg, loc)
	}})
	stages, metaArgs, err := instructions.Parse(res.AST, lint)
	if err != nil {
		t.Fatalf("parse %s instructions: %v", path, err)
	}
	if len(stages) != 2 {
		t.Fatalf("%s has %d stages, want the build stage and the final one", path, len(stages))
	}
	var args []string
	for _, a := range metaArgs {
		for _, kv := range a.Args {
			args = append(args, kv.Key+"="+kv.ValueString())
		}
	}
	lex := shell.NewLex(res.EscapeToken)
	expand := func(w string) string {
		out, _, err := lex.ProcessWord(w, shell.EnvsFromSlice(args))
		if err != nil {
			t.Fatalf("expand %q in %s: %v", w, path, err)
		}
		return out
	}
	img := dropInImage{env: map[string]string{}}
	img.buildBase = []string{expand(stages[0].BaseName)}
	final := stages[1]
	img.base = expand(final.BaseName)
	user := "(base image's)"
	for _, c := range final.Commands {
		switch c := c.(type) {
		case *instructions.CopyCommand:
			img.copies = append(img.copies, c)
		case *instructions.UserCommand:
			user, img.user = c.User, c.User
		case *instructions.RunCommand:
			img.runs = append(img.runs, run{user: user, command: strings.Join(c.CmdLine, " ")})
		case *instructions.EnvCommand:
			for _, kv := range c.Env {
				img.env[kv.Key] = expand(kv.Value)
			}
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

// Each drop-in builds hapsuper as the root Dockerfile does, on the
// controller's pinned image; installs it also as gopherd where the
// controller looks for it; creates hapsuper's private directory and runs as
// its owner, haproxy; stops on
// SIGTERM, a stop signal of hapsuper's; runs `hapsuper -- <mode flag>` with
// the chart's args appended (exec form, no CMD words); and its HAPSUPER_*
// settings give HAProxy the image's own command line through the wrapper,
// with the controllers' master socket, 66 % of the memory limit and the aux
// file created when the image's PID 1 created it.
func TestDockerfile_HAProxyTechDropIns(t *testing.T) {
	rootImg := loadImage(t)
	for _, di := range dropIns {
		t.Run(filepath.Base(filepath.Dir(di.path)), func(t *testing.T) {
			img := loadDropIn(t, di.path)
			if !exactTag.MatchString(img.base) {
				t.Errorf("final base %q: want the controller's image at an exact release tag", img.base)
			}
			if !slices.Equal(img.buildBase, rootImg.buildBase) {
				t.Errorf("build stage on %q, the root Dockerfile's on %q: keep them equal", img.buildBase, rootImg.buildBase)
			}
			if !slices.ContainsFunc(img.copies, func(c *instructions.CopyCommand) bool {
				return c.From == "build" && slices.Equal(c.SourcePaths, []string{"/out/hapsuper"}) && c.DestPath == binaryPath
			}) {
				t.Errorf("no COPY --from=build /out/hapsuper %s", binaryPath)
			}
			gopherd := filepath.Join(di.gopherdDir, "gopherd")
			if !slices.ContainsFunc(img.runs, func(r run) bool {
				return containsRun(strings.Fields(r.command), []string{"ln", "-sf", binaryPath, gopherd})
			}) {
				t.Errorf("no RUN links %s to %s (the controller's fallback reload)", gopherd, binaryPath)
			}
			dir := runDir(t)
			if !slices.ContainsFunc(img.runs, func(r run) bool {
				f := strings.Fields(r.command)
				return slices.Contains(f, dir) && slices.Contains(f, "0700")
			}) {
				t.Errorf("no RUN creates %s mode 0700", dir)
			}
			if img.user != "haproxy" {
				t.Errorf("the image's USER is %q, want haproxy: the owner of hapsuper's directory, as the charts' unprivileged mode runs it", img.user)
			}
			stop, err := conf.ParseSignal(img.stopSignal)
			if err != nil || stop != syscall.SIGTERM {
				t.Errorf("STOPSIGNAL %q: want SIGTERM, as the images had it (%v)", img.stopSignal, err)
			}
			if img.entryShell || !slices.Equal(img.entrypoint, []string{binaryPath, "--", di.modeFlag}) {
				t.Errorf("ENTRYPOINT %q (shell form %v): want exec form [%s -- %s], the chart's args appended", img.entrypoint, img.entryShell, binaryPath, di.modeFlag)
			}
			if img.cmdShell || len(img.cmd) != 0 {
				t.Errorf("CMD %q: want [], the chart's args alone after the mode flag", img.cmd)
			}

			command := strings.Fields(img.env[conf.EnvName("haproxy-command")])
			lookup := func(name string) (string, bool) {
				if name == conf.EnvName("haproxy-command") || name == conf.EnvName("companion") {
					return "", false // the companion's settings, checked with it
				}
				v, ok := img.env[name]
				return v, ok
			}
			s, err := conf.Parse(append([]string{"--"}, command...), lookup)
			if err != nil {
				t.Fatalf("hapsuper refuses the image's HAProxy command %q: %v", command, err)
			}
			argv := haproxy.Command(s, false)
			if argv[0] != di.wrapper {
				t.Errorf("HAProxy runs as %q, want through %s (so do -vv and haproxy -c)", argv[0], di.wrapper)
			}
			if s.MasterSocket != controllerMasterSocket {
				t.Errorf("master socket %q, want %s, where the controller reloads", s.MasterSocket, controllerMasterSocket)
			}
			var files []string
			for i, a := range argv {
				if a == "-f" && i+1 < len(argv) && argv[i+1] != s.OverrideFile {
					files = append(files, argv[i+1])
				}
			}
			if !slices.Equal(files, di.configs) {
				t.Errorf("HAProxy's -f files %q, want the image's %q", files, di.configs)
			}
			if s.HAProxyMemoryShare != 66 {
				t.Errorf("--haproxy-memory-share %d, want 66 (gopherd's {{mem 66%%}})", s.HAProxyMemoryShare)
			}
			if s.CompanionMemoryShare != 33 {
				t.Errorf("--companion-memory-share %d, want 33 (gopherd's {{mem 33%%}} for the controller)", s.CompanionMemoryShare)
			}
			if di.createdAux != "" && !slices.Equal(s.CreateIfMissing, []string{di.createdAux}) {
				t.Errorf("--create-if-missing %q, want [%s]", s.CreateIfMissing, di.createdAux)
			}
		})
	}
}
