package harness

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
)

// product is the module path of hapsuper itself: the test and bench modules
// point it at the repository's root with a replace directive.
const product = "github.com/hapsuper/hapsuper"

// root is Root's answer, asked once per process.
var root struct {
	once sync.Once
	dir  string
	err  error
}

// Root returns the directory of hapsuper's own module: cmd/hapsuper,
// deploy/ and the Dockerfile are there. It works from the product, test and
// bench modules alike.
func Root() (string, error) {
	root.once.Do(func() { root.dir, root.err = findRoot() })
	return root.dir, root.err
}

func findRoot() (string, error) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", product).Output()
	if err != nil {
		var detail string
		if ee, ok := err.(*exec.ExitError); ok {
			detail = strings.TrimSpace(string(ee.Stderr))
		}
		return "", fmt.Errorf("find module %s with go list -m (run from inside the repository): %w %s", product, err, detail)
	}
	dir := strings.TrimSpace(string(out))
	if dir == "" {
		return "", fmt.Errorf("find module %s: go list -m names no directory (run from inside the repository)", product)
	}
	return dir, nil
}

// Build compiles ./cmd/hapsuper into dir/hapsuper as the Dockerfile does:
// static (CGO_ENABLED=0) and -trimpath.
func Build(dir string) (string, error) {
	src, err := Root()
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "hapsuper")
	cmd := exec.Command("go", "build", "-trimpath", "-o", bin, "./cmd/hapsuper")
	cmd.Dir, cmd.Env = src, append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/hapsuper in %s: %w\n%s", src, err, out)
	}
	return bin, nil
}

// binary is the one build of a process (Binary).
var binary struct {
	once sync.Once
	dir  string
	path string
	err  error
}

// Binary builds ./cmd/hapsuper once per process and returns its path. The
// directory is named hapsuper-k8s-<pid>-bin-…, as the cluster harness names
// its own, so that a later run removes it when this one crashed;
// RemoveBinary removes it at the end of a clean run.
func Binary() (string, error) {
	binary.once.Do(func() {
		binary.dir, binary.err = os.MkdirTemp("", fmt.Sprintf("hapsuper-k8s-%d-bin-", os.Getpid()))
		if binary.err != nil {
			binary.err = fmt.Errorf("create the build directory: %w", binary.err)
			return
		}
		binary.path, binary.err = Build(binary.dir)
	})
	return binary.path, binary.err
}

// RemoveBinary removes what Binary built, if anything.
func RemoveBinary() {
	if binary.dir != "" {
		os.RemoveAll(binary.dir)
	}
}
