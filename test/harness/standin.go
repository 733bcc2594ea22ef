package harness

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// BuildStandinController compiles the stand-in ingress controller
// (standin/controller: it writes HAProxy's configuration and aux file and
// reloads over the master CLI, as HAProxy Technologies' controllers do)
// into dir/name, static, for hapsuper's --companion in tests and images.
func BuildStandinController(dir, name string) (string, error) {
	src, err := Root()
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, name)
	cmd := exec.Command("go", "build", "-trimpath", "-o", bin, "./harness/standin/controller")
	cmd.Dir, cmd.Env = filepath.Join(src, "test"), append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./harness/standin/controller in %s: %w\n%s", cmd.Dir, err, out)
	}
	return bin, nil
}
