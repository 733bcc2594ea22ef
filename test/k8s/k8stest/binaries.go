package k8stest

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/hapsuper/hapsuper/test/harness"
)

// KubernetesVersion is the release the harness runs; hack/k8s-binaries.sh
// builds the same one from tools/k8s.
const KubernetesVersion = "v1.37.2"

// binaryNames are the programs hack/k8s-binaries.sh puts in its cache
// directory.
var binaryNames = []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-proxy"}

// hostTools are the programs the harness or kube-proxy run.
var hostTools = []string{"ip", "nft", "iptables", "iptables-restore", "conntrack"}

// requirePrerequisites returns the directory holding the binaries, or ends
// the test: skipped normally, failed when CI=true, with what to do.
func requirePrerequisites(t harness.TB) string {
	t.Helper()
	dir, err := prerequisites()
	if err == nil {
		return dir
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("k8stest: %v", err)
	}
	t.Skipf("k8stest: %v", err)
	return ""
}

func prerequisites() (string, error) {
	if os.Geteuid() != 0 {
		return "", errors.New("the Kubernetes harness needs root (network namespaces)")
	}
	for _, tool := range hostTools {
		if _, err := exec.LookPath(tool); err != nil {
			return "", fmt.Errorf("look up %s: %w (install iproute2, nftables, iptables, conntrack)", tool, err)
		}
	}
	return binaryDir()
}

// binaryDir returns $HAPSUPER_K8S_BIN, or the cache directory
// hack/k8s-binaries.sh writes to, after checking all four binaries are there.
func binaryDir() (string, error) {
	dir := os.Getenv("HAPSUPER_K8S_BIN")
	if dir == "" {
		var err error
		if dir, err = cacheDir(); err != nil {
			return "", err
		}
	}
	for _, name := range binaryNames {
		if _, err := exec.LookPath(filepath.Join(dir, name)); err != nil {
			return "", fmt.Errorf("find %s in %s: %w (run hack/k8s-binaries.sh, or set HAPSUPER_K8S_BIN)", name, dir, err)
		}
	}
	return dir, nil
}

// kubeletTools are the host programs a kubelet node needs.
var kubeletTools = []string{"containerd", "runc", "ctr", "nsenter", "gcc", "/usr/lib/cni/bridge", "/usr/lib/cni/host-local", "/usr/lib/cni/loopback"}

// requireKubeletPrerequisites ends the test (skipped normally, failed when
// CI=true) when the kubelet binary or a host program is missing.
func requireKubeletPrerequisites(t harness.TB, bin string) {
	t.Helper()
	var err error
	if _, e := exec.LookPath(filepath.Join(bin, "kubelet")); e != nil {
		err = fmt.Errorf("find kubelet in %s: %w (run hack/k8s-binaries.sh, or set HAPSUPER_K8S_BIN)", bin, e)
	}
	for _, tool := range kubeletTools {
		if _, e := exec.LookPath(tool); e != nil && err == nil {
			err = fmt.Errorf("look up %s: %w (apt-get install containerd runc containernetworking-plugins gcc libc6-dev util-linux)", tool, e)
		}
	}
	if err == nil {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("k8stest: %v", err)
	}
	t.Skipf("k8stest: %v", err)
}

// cacheDir computes the directory exactly as hack/k8s-binaries.sh does:
// ${HAPSUPER_K8S_CACHE:-/var/cache/hapsuper/k8s}/<version>-<sha256(go.sum)[:12]>.
func cacheDir() (string, error) {
	sumPath, err := findUp(filepath.Join("tools", "k8s", "go.sum"))
	if err != nil {
		return "", err
	}
	data, err := os.ReadFile(sumPath)
	if err != nil {
		return "", fmt.Errorf("read %s: %w", sumPath, err)
	}
	sum := sha256.Sum256(data)
	root := os.Getenv("HAPSUPER_K8S_CACHE")
	if root == "" {
		root = "/var/cache/hapsuper/k8s"
	}
	return filepath.Join(root, KubernetesVersion+"-"+hex.EncodeToString(sum[:])[:12]), nil
}

// findUp looks for rel in the working directory and each parent (go test
// runs in the package directory, somewhere below the repository root).
func findUp(rel string) (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("get working directory: %w", err)
	}
	for {
		p := filepath.Join(dir, rel)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("find %s above the working directory: not found (set HAPSUPER_K8S_BIN to the binaries' directory)", rel)
		}
		dir = parent
	}
}
