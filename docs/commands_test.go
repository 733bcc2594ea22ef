package docs

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// readmeSection returns the lines of README.md under the heading title, up
// to the next heading of the same or a higher level.
func readmeSection(t *testing.T, title string) []string {
	t.Helper()
	b, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	level := strings.Index(title, " ")
	var out []string
	in := false
	for _, l := range strings.Split(string(b), "\n") {
		if h := strings.Index(l, " "); strings.HasPrefix(l, "#") && h > 0 && h <= level && strings.Trim(l[:h], "#") == "" {
			if in {
				break
			}
			in = l == title
			continue
		}
		if in {
			out = append(out, l)
		}
	}
	if len(out) == 0 {
		t.Fatalf("README.md has no section %q", title)
	}
	return out
}

// indentedCommands are the lines of an indented code block in lines.
func indentedCommands(lines []string) []string {
	var cmds []string
	for _, l := range lines {
		if c, ok := strings.CutPrefix(l, "    "); ok && strings.TrimSpace(c) != "" {
			cmds = append(cmds, c)
		}
	}
	return cmds
}

// needHAProxy skips without haproxy on the PATH, or fails with CI=true.
func needHAProxy(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("haproxy"); err != nil {
		msg := "the README's commands need HAProxy 2.6 or newer on the PATH (apt-get install haproxy): " + err.Error()
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
}

// goTool is the go command of the toolchain running the test.
func goTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return filepath.Join(runtime.GOROOT(), "bin", "go")
}

// The README's two commands are there as .ci/run greps them, and `make
// test`, which runs this test, is not run from here.
func TestREADMETwoCommands(t *testing.T) {
	cmds := indentedCommands(readmeSection(t, "## The two commands"))
	want := []string{"hack/demo.sh", "make test"}
	if strings.Join(cmds, "\n") != strings.Join(want, "\n") {
		t.Errorf("the two commands are %q, want %q (.ci/run greps \"    make test\")", cmds, want)
	}
}

// The README's build command, run as written, makes the binary it names,
// which prints its version and the help the README's Usage section shows.
func TestREADMEBuildAndHelp(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		msg := "the README's build command needs make: " + err.Error()
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	build := regexp.MustCompile("The binary: `(make build)` \\(`(\\./[^`]+)`").FindStringSubmatch(strings.Join(readmeSection(t, "## Building"), " "))
	if build == nil {
		t.Fatal("README's ## Building no longer says: The binary: `make build` (`./bin/...`")
	}
	bin := runBuild(t, build[1], build[2])
	out, err := exec.Command(bin, "version").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "hapsuper ") || !strings.Contains(string(out), runtime.Version()+", "+runtime.GOOS+"/"+runtime.GOARCH) {
		t.Errorf("%s version: %v\n%s", build[2], err, out)
	}
	// Go stamps the commit from a .git directory; a worktree's .git is a
	// file, which Go's VCS stamping does not follow.
	if fi, err := os.Stat("../.git"); err == nil && fi.IsDir() && !strings.Contains(string(out), "commit ") {
		t.Errorf("%s version, built in a Git checkout, names no commit:\n%s", build[2], out)
	}
	help, err := exec.Command(bin, "help").CombinedOutput()
	if err != nil {
		t.Fatalf("%s help: %v\n%s", build[2], err, help)
	}
	usage := indentedCommands(readmeSection(t, "## Usage"))
	if len(usage) < 5 {
		t.Fatalf("README's ## Usage shows %d lines", len(usage))
	}
	for _, u := range usage {
		if !strings.Contains(string(help), u) {
			t.Errorf("hapsuper help lacks the README's usage line %q:\n%s", u, help)
		}
	}
}

var buildOnce struct {
	sync.Once
	bin string
	err error
	out []byte
}

// runBuild runs the README's build command in the repository's root once
// and returns the binary it made.
func runBuild(t *testing.T, command, binary string) string {
	t.Helper()
	buildOnce.Do(func() {
		args := strings.Fields(command)
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Dir = ".."
		buildOnce.out, buildOnce.err = cmd.CombinedOutput()
		buildOnce.bin, _ = filepath.Abs(filepath.Join("..", binary))
	})
	if buildOnce.err != nil {
		t.Fatalf("%s: %v\n%s", command, buildOnce.err, buildOnce.out)
	}
	if _, err := os.Stat(buildOnce.bin); err != nil {
		t.Fatalf("%s did not make %s: %v\n%s", command, binary, err, buildOnce.out)
	}
	return buildOnce.bin
}

// The README's demo command, run as written from the repository's root:
// its first line, before anything is compiled, says what it builds; then
// HAProxy answers the URL it prints, `hapsuper status` on the socket it
// names says serving, and Ctrl-C (SIGINT to its process group, as a
// terminal sends it) drains, and it exits 0. The same with HAProxy named
// after -- (the README's form for an HAProxy off the PATH).
func TestREADMEDemo(t *testing.T) {
	needHAProxy(t)
	if _, err := exec.LookPath("make"); err != nil {
		msg := "the README's demo command needs make: " + err.Error()
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	var demo string
	for _, c := range indentedCommands(readmeSection(t, "## The two commands")) {
		if strings.Contains(c, "demo") {
			demo = c
		}
	}
	if demo == "" {
		t.Fatal("README's ## The two commands shows no demo command")
	}
	haproxy, _ := exec.LookPath("haproxy")
	for name, argv := range map[string][]string{
		"as typed":         strings.Fields(demo),
		"haproxy after --": append(strings.Fields(demo), "--", haproxy),
	} {
		t.Run(name, func(t *testing.T) {
			first, err, logs := runDemo(t, argv)
			if !strings.HasPrefix(first, "make build: go build") {
				t.Errorf("%s: the first line is %q, want the build's, before it compiles", strings.Join(argv, " "), first)
			}
			if err != nil {
				t.Errorf("%s after Ctrl-C: %v, want exit 0; stderr:\n%s", strings.Join(argv, " "), err, logs)
			}
		})
	}
}

// runDemo runs argv from the repository's root, follows the demo's first
// lines, curls it, asks its status, sends Ctrl-C and returns the first line
// of stdout, how the process ended and its stderr.
func runDemo(t *testing.T, argv []string) (string, error, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute) // a first build on a loaded machine
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = ".."
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)

	// The demo's first lines: where HAProxy answers and the status command.
	var first, url, statusLine string
	sc := bufio.NewScanner(out)
	for (url == "" || statusLine == "") && sc.Scan() {
		l := strings.TrimSpace(sc.Text())
		if first == "" {
			first = l
		}
		if u, ok := strings.CutPrefix(l, "try:    curl -s "); ok {
			url = u
		}
		if s, ok := strings.CutPrefix(l, "status: "); ok {
			statusLine = s
		}
	}
	go io.Copy(io.Discard, out)
	if url == "" || statusLine == "" {
		cmd.Wait()
		t.Fatalf("the demo did not print its try: and status: lines; stderr:\n%s", stderr.String())
	}

	var body string
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		resp, err := http.Get(url)
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			body = string(b)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET %s: %v; stderr:\n%s", url, err, stderr.String())
		}
	}
	if !strings.Contains(body, "served by HAProxy under hapsuper") {
		t.Errorf("GET %s: %q", url, body)
	}

	// The status command it prints, without --watch (which would follow
	// the demo to its end), run as printed.
	st := strings.Fields(strings.Replace(statusLine, " --watch", "", 1))
	if len(st) < 4 || st[len(st)-2] != "--status-socket" {
		t.Fatalf("the demo's status line %q: want <command> status --watch --status-socket <socket>", statusLine)
	}
	// HAProxy may answer before hapsuper has read its master CLI once
	// (phase starting): asked again until serving, for at most 30 s.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		scmd := exec.Command(st[0], st[1:]...)
		if st[0] == "go" {
			scmd = exec.Command(goTool(), st[1:]...)
		}
		scmd.Dir = ".."
		sout, err := scmd.CombinedOutput()
		if err == nil && strings.Contains(string(sout), "phase:") && strings.Contains(string(sout), "serving") {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("%s: %v\n%s", strings.Join(st, " "), err, sout)
			break
		}
	}

	if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	err = cmd.Wait()
	logs := stderr.String()
	for _, want := range []string{"drain started", "signal=SIGINT", "drain ended", "reason=quiet", "haproxy exited", "code=0"} {
		if !strings.Contains(logs, want) {
			t.Errorf("the demo's log lacks %q:\n%s", want, logs)
		}
	}
	return first, err, logs
}

// lockedBuffer is an io.Writer that can be read while a process writes it.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// deploy/README.md's Apply commands, run as typed from the repository's
// root with kubectl's built-in kustomize (kubectl kustomize for kubectl
// apply -k, which would need a cluster): the kustomization they write
// builds, and its Deployment runs the image it names.
func TestDeployApplyCommands(t *testing.T) {
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		msg := "deploy/README.md's commands need kubectl: " + err.Error()
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	b, err := os.ReadFile("../deploy/README.md")
	if err != nil {
		t.Fatal(err)
	}
	var script []string
	in := false
	for _, l := range strings.Split(string(b), "\n") {
		switch {
		case l == "## Apply":
			in = true
		case in && strings.HasPrefix(l, "## "):
			in = false
		case in:
			if c, ok := strings.CutPrefix(l, "    "); ok {
				script = append(script, c)
			} else if len(script) > 0 && strings.TrimSpace(l) != "" {
				in = false // the end of the first code block
			}
		}
	}
	if len(script) < 3 || script[len(script)-1] != "kubectl apply -k my-hapsuper" {
		t.Fatalf("deploy/README.md's Apply commands end %q, want kubectl apply -k my-hapsuper", script)
	}
	// In the repository's root, as the README says, under a name of the
	// test's own.
	dir, err := os.MkdirTemp("..", "my-hapsuper-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Remove(dir); err != nil { // the script's mkdir makes it
		t.Fatal(err)
	}
	sh := strings.ReplaceAll(strings.Join(script, "\n"), "my-hapsuper", filepath.Base(dir))
	sh = strings.ReplaceAll(sh, "kubectl create namespace hapsuper", ": kubectl create namespace hapsuper")
	sh = strings.ReplaceAll(sh, "kubectl apply -k ", kubectl+" kustomize ")
	cmd := exec.Command("sh", "-ec", sh)
	cmd.Dir = ".."
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("deploy/README.md's Apply commands: %v\n%s", err, out)
	}
	for _, want := range []string{"kind: Deployment", "image: registry.example/hapsuper-haproxy:v1.2.3", "namespace: hapsuper"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the kustomization deploy/README.md writes renders without %q:\n%s", want, out)
		}
	}
}

// The commands the READMEs show need only what the README says to install:
// kubectl's built-in kustomize has no `kustomize edit`, and the Helm
// command sets the image that deploy/haproxy-ingress/values.yaml leaves a
// placeholder (registry.example/…:replace-me, an ImagePullBackOff as
// shipped).
func TestREADMECommandsNeedNoOtherTool(t *testing.T) {
	for _, p := range []string{"../README.md", "../deploy/README.md", "../deploy/haproxy-ingress/README.md", "releases.md", "deploying.md"} {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), "kustomize edit") {
			t.Errorf("%s shows kustomize edit, which kubectl's kustomize lacks: show an images: entry in a kustomization instead", p)
		}
	}
	readme, err := os.ReadFile("../deploy/haproxy-ingress/README.md")
	if err != nil {
		t.Fatal(err)
	}
	values, err := os.ReadFile("../deploy/haproxy-ingress/values.yaml")
	if err != nil {
		t.Fatal(err)
	}
	helm := regexp.MustCompile("(?s)```\n(helm repo add.*?)```").FindStringSubmatch(string(readme))
	if helm == nil {
		t.Fatal("deploy/haproxy-ingress/README.md shows no helm block")
	}
	for _, set := range []string{"--set controller.haproxy.image.repository=", "--set controller.haproxy.image.tag="} {
		if !strings.Contains(helm[1], set) {
			t.Errorf("the helm command does not set the image (%s...):\n%s", set, helm[1])
		}
	}
	if !regexp.MustCompile(`(?m)^controller:\n(?:.*\n)*?  haproxy:\n(?:.*\n)*?    image:\n(?:\s*#.*\n)*      repository: \S+\n      tag: \S+`).Match(values) {
		t.Error("values.yaml no longer has controller.haproxy.image.repository and tag, which the helm command sets")
	}
}
