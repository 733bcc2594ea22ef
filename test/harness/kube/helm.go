package kube

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/hapsuper/hapsuper/test/harness"
)

// Where the peers' charts and Helm are: hack/charts.sh copies the charts'
// tarballs into $HAPSUPER_CHARTS (default ChartsDefault) and installs Helm
// (HelmModule) as HelmInstalled; $HELM overrides it.
const (
	ChartsDefault = "/var/cache/hapsuper/charts"
	HelmModule    = "helm.sh/helm/v3/cmd/helm@v3.21.4"
	HelmInstalled = "/var/cache/hapsuper/bin/helm"
	// KubeVersion is the cluster's version Helm renders for (the charts
	// require 1.23 or later): the Kubernetes test/k8s runs
	// (tools/k8s/go.mod).
	KubeVersion = "1.37.2"
)

// HelmTemplate renders the chart directory dir of the tarball (checked
// against its sha256) as `helm template release -n ns -f values` does. A
// missing tarball skips the test, and fails it under CI=true.
func HelmTemplate(t harness.TB, tarball, sum, dir, release, ns, values string) Rendered {
	t.Helper()
	charts := os.Getenv("HAPSUPER_CHARTS")
	if charts == "" {
		charts = ChartsDefault
	}
	b, err := os.ReadFile(filepath.Join(charts, tarball))
	if err != nil {
		msg := fmt.Sprintf("no chart %s in %s (%v): run hack/charts.sh, or set HAPSUPER_CHARTS", tarball, charts, err)
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s", msg)
		}
		t.Skipf("%s", msg)
	}
	if got := sha256.Sum256(b); hex.EncodeToString(got[:]) != sum {
		t.Fatalf("chart %s has sha256 %x, want %s", tarball, got, sum)
	}
	root, err := os.MkdirTemp("", "hapsuper-helm-")
	if err != nil {
		t.Fatalf("%v", err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	chart, err := extractChart(b, root, dir)
	if err != nil {
		t.Fatalf("extract %s: %v", tarball, err)
	}
	argv := []string{"template", release, chart, "--namespace", ns, "--kube-version", KubeVersion, "-f", values}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute) // a first build of Helm takes minutes
	defer cancel()
	var cmd *exec.Cmd
	if h := helmBinary(); h != "" {
		cmd = exec.CommandContext(ctx, h, argv...)
	} else {
		cmd = exec.CommandContext(ctx, "go", append([]string{"run", HelmModule}, argv...)...)
		cmd.Dir = root // outside every module: go run pkg@version
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(cmd.Args, " "), err, stderr.String())
	}
	t.Logf("rendered %s with %s", tarball, cmd.Args[0]+" "+cmd.Args[1])
	var r Rendered
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(out), 4096)
	for {
		var o map[string]any
		if err := dec.Decode(&o); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("decode helm template output: %v", err)
		}
		if o != nil {
			r.Objects = append(r.Objects, &unstructured.Unstructured{Object: o})
		}
	}
	return r
}

// helmBinary is $HELM, else the Helm hack/charts.sh installs, else ""
// (then HelmTemplate builds it from its module).
func helmBinary() string {
	if h := os.Getenv("HELM"); h != "" {
		return h
	}
	if _, err := os.Stat(HelmInstalled); err == nil {
		return HelmInstalled
	}
	return ""
}

// extractChart writes the tarball's files under root and returns the
// directory named dir that holds a Chart.yaml.
func extractChart(b []byte, root, dir string) (string, error) {
	gz, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return "", err
	}
	tr := tar.NewReader(gz)
	var chart string
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return "", err
		}
		name := filepath.Clean(h.Name)
		if filepath.IsAbs(name) || strings.HasPrefix(name, "..") {
			return "", fmt.Errorf("entry %q outside the archive", h.Name)
		}
		p := filepath.Join(root, name)
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(p, 0o755)
		case tar.TypeReg:
			if err = os.MkdirAll(filepath.Dir(p), 0o755); err == nil {
				err = writeLimited(p, tr, 16<<20)
			}
			if filepath.Base(p) == "Chart.yaml" && filepath.Base(filepath.Dir(p)) == dir && chart == "" {
				chart = filepath.Dir(p)
			}
		}
		if err != nil {
			return "", err
		}
	}
	if chart == "" {
		return "", fmt.Errorf("no %s/Chart.yaml in it", dir)
	}
	return chart, nil
}

func writeLimited(path string, r io.Reader, limit int64) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, io.LimitReader(r, limit)); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
