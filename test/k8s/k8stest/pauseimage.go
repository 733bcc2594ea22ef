package k8stest

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// pauseImageRef names the pod sandbox image: no registry is reachable, so
// the harness builds it from Kubernetes' own pause.c.
const pauseImageRef = "localhost/hapsuper-pause:" + KubernetesVersion

// pauseImage compiles build/pause/linux/pause.c of the Kubernetes module
// (in the Go module cache: hack/k8s-binaries.sh downloaded it) statically
// with gcc and packs it as a one-layer OCI archive at dir/pause.oci.tar,
// which ctr imports as pauseImageRef.
func pauseImage(ctx context.Context, dir string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	modcache, err := exec.CommandContext(ctx, "go", "env", "GOMODCACHE").Output()
	if err != nil {
		return "", fmt.Errorf("find the Go module cache (go env GOMODCACHE): %w", err)
	}
	src := filepath.Join(strings.TrimSpace(string(modcache)), "k8s.io", "kubernetes@"+KubernetesVersion, "build", "pause", "linux", "pause.c")
	if _, err := os.Stat(src); err != nil {
		return "", fmt.Errorf("find pause.c: %w (run hack/k8s-binaries.sh, which downloads k8s.io/kubernetes@%s)", err, KubernetesVersion)
	}
	bin := filepath.Join(dir, "pause")
	out, err := exec.CommandContext(ctx, "gcc", "-Os", "-static", "-DVERSION="+KubernetesVersion, "-o", bin, src).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("compile %s (install gcc and libc6-dev): %w: %s", src, err, out)
	}
	pause, err := os.ReadFile(bin)
	if err != nil {
		return "", fmt.Errorf("read %s: %w", bin, err)
	}
	archive := filepath.Join(dir, "pause.oci.tar")
	if err := writeOCIArchive(archive, pauseImageRef, map[string][]byte{"pause": pause}, []string{"/pause"}); err != nil {
		return "", err
	}
	return archive, nil
}

// writeOCIArchive writes an oci-archive of one image: one uncompressed
// layer holding files (mode 0755, at the root), the entrypoint, and the
// index's ref.name annotation set to ref.
func writeOCIArchive(path, ref string, files map[string][]byte, entrypoint []string) error {
	var layer bytes.Buffer
	lw := tar.NewWriter(&layer)
	for name, data := range files {
		if err := lw.WriteHeader(&tar.Header{Name: name, Mode: 0o755, Size: int64(len(data)), Typeflag: tar.TypeReg}); err != nil {
			return fmt.Errorf("pack %s: %w", name, err)
		}
		if _, err := lw.Write(data); err != nil {
			return fmt.Errorf("pack %s: %w", name, err)
		}
	}
	if err := lw.Close(); err != nil {
		return fmt.Errorf("pack layer: %w", err)
	}
	layerDigest := digest(layer.Bytes())
	config, err := json.Marshal(map[string]any{
		"architecture": "amd64",
		"os":           "linux",
		"config":       map[string]any{"Entrypoint": entrypoint},
		"rootfs":       map[string]any{"type": "layers", "diff_ids": []string{layerDigest}},
	})
	if err != nil {
		return fmt.Errorf("encode image config: %w", err)
	}
	manifest, err := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"mediaType":     "application/vnd.oci.image.manifest.v1+json",
		"config":        descriptor("application/vnd.oci.image.config.v1+json", config, nil),
		"layers":        []any{descriptor("application/vnd.oci.image.layer.v1.tar", layer.Bytes(), nil)},
	})
	if err != nil {
		return fmt.Errorf("encode image manifest: %w", err)
	}
	index, err := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"manifests": []any{descriptor("application/vnd.oci.image.manifest.v1+json", manifest,
			map[string]string{"org.opencontainers.image.ref.name": ref})},
	})
	if err != nil {
		return fmt.Errorf("encode image index: %w", err)
	}
	var out bytes.Buffer
	tw := tar.NewWriter(&out)
	entries := []struct {
		name string
		data []byte
	}{
		{"oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)},
		{"index.json", index},
		{blobPath(config), config},
		{blobPath(manifest), manifest},
		{blobPath(layer.Bytes()), layer.Bytes()},
	}
	for _, e := range entries {
		if err := tw.WriteHeader(&tar.Header{Name: e.name, Mode: 0o644, Size: int64(len(e.data)), Typeflag: tar.TypeReg}); err != nil {
			return fmt.Errorf("write %s: %w", e.name, err)
		}
		if _, err := tw.Write(e.data); err != nil {
			return fmt.Errorf("write %s: %w", e.name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.WriteFile(path, out.Bytes(), 0o600); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

func digest(data []byte) string {
	sum := sha256.Sum256(data)
	return "sha256:" + hex.EncodeToString(sum[:])
}

func blobPath(data []byte) string {
	return "blobs/sha256/" + strings.TrimPrefix(digest(data), "sha256:")
}

func descriptor(mediaType string, data []byte, annotations map[string]string) map[string]any {
	d := map[string]any{"mediaType": mediaType, "digest": digest(data), "size": len(data)}
	if annotations != nil {
		d["annotations"] = annotations
	}
	return d
}
