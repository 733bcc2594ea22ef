package k8stest

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// The archive writeOCIArchive makes is a valid OCI layout: the index names
// the reference and points at the manifest, every blob is stored under its
// own digest, and the layer holds the file with the entrypoint's name.
func TestWriteOCIArchive(t *testing.T) {
	path := filepath.Join(t.TempDir(), "img.tar")
	if err := writeOCIArchive(path, "localhost/x:1", map[string][]byte{"pause": []byte("binary")}, []string{"/pause"}); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	files := untar(t, data)
	if string(files["oci-layout"]) != `{"imageLayoutVersion":"1.0.0"}` {
		t.Errorf("oci-layout = %q", files["oci-layout"])
	}
	for name, blob := range files {
		if filepath.Dir(name) == "blobs/sha256" && blobPath(blob) != name {
			t.Errorf("blob %s holds content of digest %s", name, digest(blob))
		}
	}
	var index struct{ Manifests []ociDesc }
	mustJSON(t, files["index.json"], &index)
	if len(index.Manifests) != 1 || index.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != "localhost/x:1" {
		t.Fatalf("index = %+v, want one manifest named localhost/x:1", index)
	}
	var manifest struct {
		Config ociDesc
		Layers []ociDesc
	}
	mustJSON(t, blobOf(t, files, index.Manifests[0]), &manifest)
	var config struct {
		Config struct{ Entrypoint []string }
		RootFS struct {
			DiffIDs []string `json:"diff_ids"`
		}
	}
	mustJSON(t, blobOf(t, files, manifest.Config), &config)
	if len(config.Config.Entrypoint) != 1 || config.Config.Entrypoint[0] != "/pause" {
		t.Errorf("entrypoint = %v, want [/pause]", config.Config.Entrypoint)
	}
	if len(manifest.Layers) != 1 || len(config.RootFS.DiffIDs) != 1 || config.RootFS.DiffIDs[0] != manifest.Layers[0].Digest {
		t.Fatalf("layers %+v, diff_ids %v: want one uncompressed layer named by both", manifest.Layers, config.RootFS.DiffIDs)
	}
	layer := untar(t, blobOf(t, files, manifest.Layers[0]))
	if string(layer["pause"]) != "binary" {
		t.Errorf("layer holds %v, want pause", layer)
	}
}

// ociDesc is an OCI content descriptor.
type ociDesc struct {
	MediaType, Digest string
	Size              int
	Annotations       map[string]string
}

// blobOf returns the blob d points at, checking its size.
func blobOf(t *testing.T, files map[string][]byte, d ociDesc) []byte {
	t.Helper()
	blob, ok := files["blobs/sha256/"+d.Digest[len("sha256:"):]]
	if !ok || len(blob) != d.Size {
		t.Fatalf("blob %s: present %v, size %d, want %d", d.Digest, ok, len(blob), d.Size)
	}
	return blob
}

func untar(t *testing.T, data []byte) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	tr := tar.NewReader(bytes.NewReader(data))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		out[h.Name] = b
	}
}

func mustJSON(t *testing.T, data []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("decode %s: %v", data, err)
	}
}

func TestUnescapeMount(t *testing.T) {
	for in, want := range map[string]string{
		`/tmp/a`:             "/tmp/a",
		`/tmp/with\040space`: "/tmp/with space",
		`/tmp/tab\011x\134`:  "/tmp/tab\tx\\",
	} {
		if got := unescapeMount(in); got != want {
			t.Errorf("unescapeMount(%q) = %q, want %q", in, got, want)
		}
	}
}
