package main

import (
	"archive/tar"
	"bufio"
	"bytes"
	"debug/elf"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	v1 "github.com/authzed/authzed-go/proto/authzed/api/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// dockerfile is the image's recipe, from this package's directory.
const dockerfile = "../../deploy/Dockerfile"

// image is what the tests read of the Dockerfile.
type image struct {
	buildEnv   []string // the go build line's environment
	buildArgs  []string // its arguments, after `go`
	output     string   // where it writes the binary
	base       string   // the final stage's FROM
	user       string
	copied     string // where the final stage puts the binary
	entrypoint []string
}

func readDockerfile(t *testing.T) image {
	t.Helper()
	f, err := os.Open(dockerfile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var img image
	lines := bufio.NewScanner(f)
	for lines.Scan() {
		instr, rest, _ := strings.Cut(strings.TrimSpace(lines.Text()), " ")
		switch instr {
		case "FROM":
			img.base, _, _ = strings.Cut(rest, " ")
		case "USER":
			img.user = rest
		case "COPY":
			if strings.HasPrefix(rest, "--from=build ") {
				fields := strings.Fields(rest)
				img.copied = fields[len(fields)-1]
			}
		case "ENTRYPOINT":
			if err := json.Unmarshal([]byte(rest), &img.entrypoint); err != nil {
				t.Fatalf("ENTRYPOINT %s: want the exec form, a JSON list: %v", rest, err)
			}
		case "RUN":
			words := shellWords(t, rest)
			for len(words) > 0 && strings.Contains(words[0], "=") {
				img.buildEnv, words = append(img.buildEnv, words[0]), words[1:]
			}
			if len(words) > 1 && words[0] == "go" && words[1] == "build" {
				img.buildArgs = words[1:]
			}
		}
	}
	if img.buildArgs == nil {
		t.Fatalf("%s has no RUN ... go build line", dockerfile)
	}
	for i, a := range img.buildArgs {
		if a == "-o" && i+1 < len(img.buildArgs) {
			img.output = img.buildArgs[i+1]
		}
	}
	return img
}

// shellWords splits a RUN line as the shell would, for the quoting it uses: words
// separated by blanks, with '...' and "..." kept whole.
func shellWords(t *testing.T, s string) []string {
	t.Helper()
	var words []string
	var word strings.Builder
	inWord := false
	var quote rune
	for _, r := range s {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			word.WriteRune(r)
		case r == '\'' || r == '"':
			quote, inWord = r, true
		case r == ' ' || r == '\t':
			if inWord {
				words, inWord = append(words, word.String()), false
				word.Reset()
			}
		case r == '\\' || r == '$' || r == '`' || r == '&' || r == ';' || r == '|':
			t.Fatalf("RUN %s: the test reads simple commands only (found %q)", s, r)
		default:
			word.WriteRune(r)
			inWord = true
		}
	}
	if quote != 0 {
		t.Fatalf("RUN %s: unterminated quote", s)
	}
	if inWord {
		words = append(words, word.String())
	}
	return words
}

// TestDockerfileImage holds the image to being small and safe: a distroless or empty
// base, a non-root numeric user (Kubernetes' runAsNonRoot cannot check a name), and
// the binary the build stage makes as its entrypoint, built static and without build
// paths.
func TestDockerfileImage(t *testing.T) {
	img := readDockerfile(t)
	if !strings.HasPrefix(img.base, "gcr.io/distroless/static") && img.base != "scratch" {
		t.Errorf("the final stage is FROM %s; want distroless static or scratch", img.base)
	}
	if uid, _, _ := strings.Cut(img.user, ":"); uid == "" || uid == "0" || strings.Trim(uid, "0123456789") != "" {
		t.Errorf("USER %q: want a numeric, non-root user", img.user)
	}
	if len(img.entrypoint) != 1 || img.entrypoint[0] != img.copied {
		t.Errorf("ENTRYPOINT %q does not run the binary copied to %s", img.entrypoint, img.copied)
	}
	if !contains(img.buildEnv, "CGO_ENABLED=0") || !contains(img.buildArgs, "-trimpath") {
		t.Errorf("go build with %q %q: want CGO_ENABLED=0 (static) and -trimpath (reproducible)", img.buildEnv, img.buildArgs)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// TestDockerfileBinary builds latch with the Dockerfile's own go build line and the
// image around it without a Docker daemon (go-containerregistry, on an empty base:
// the distroless base cannot be fetched where the tests run), checks that the binary
// is static, then unpacks the image as a runtime would and runs its entrypoint: it
// starts, takes a schema and a relationship, and answers a check through authzed-go.
func TestDockerfileBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds latch and runs it as a child process")
	}
	img := readDockerfile(t)
	bin := filepath.Join(t.TempDir(), "latch")
	args := append([]string(nil), img.buildArgs...)
	for i := range args {
		if args[i] == img.output {
			args[i] = bin
		}
	}
	build := exec.Command("go", args...)
	build.Dir = filepath.Join("..", "..") // the Dockerfile builds from the repository root
	build.Env = append(os.Environ(), img.buildEnv...)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("the binary asks for a dynamic loader: it would not start on a distroless static base")
		}
	}
	f.Close()

	root := unpackImage(t, writeImage(t, img, bin))
	srv := startLatch(t, filepath.Join(root, img.entrypoint[0]), t.TempDir())
	defer srv.stop(t)
	c := srv.client(t)
	defer c.close()
	if _, err := v1.NewSchemaServiceClient(c.conn).WriteSchema(c.ctx, &v1.WriteSchemaRequest{Schema: crashSchema}); err != nil {
		t.Fatalf("WriteSchema: %v", err)
	}
	doc := &v1.ObjectReference{ObjectType: "doc", ObjectId: "readme"}
	alice := &v1.SubjectReference{Object: &v1.ObjectReference{ObjectType: "user", ObjectId: "alice"}}
	w, err := c.perms.WriteRelationships(c.ctx, &v1.WriteRelationshipsRequest{Updates: []*v1.RelationshipUpdate{{
		Operation: v1.RelationshipUpdate_OPERATION_CREATE, Relationship: &v1.Relationship{Resource: doc, Relation: "viewer", Subject: alice},
	}}})
	if err != nil {
		t.Fatalf("WriteRelationships: %v", err)
	}
	got, err := c.perms.CheckPermission(c.ctx, &v1.CheckPermissionRequest{
		Consistency: &v1.Consistency{Requirement: &v1.Consistency_AtLeastAsFresh{AtLeastAsFresh: w.GetWrittenAt()}},
		Resource:    doc, Permission: "viewer", Subject: alice,
	})
	if err != nil || got.GetPermissionship() != v1.CheckPermissionResponse_PERMISSIONSHIP_HAS_PERMISSION {
		t.Fatalf("CheckPermission: %v, %v; want HAS_PERMISSION", got.GetPermissionship(), err)
	}
}

// writeImage writes an OCI image layout holding the Dockerfile's final stage on an empty
// base: the binary at the path it copies it to, the CA certificates a TLS client needs
// (distroless's own), its USER and ENTRYPOINT. It returns the layout's directory.
func writeImage(t *testing.T, img image, bin string) string {
	t.Helper()
	var files bytes.Buffer
	tw := tar.NewWriter(&files)
	addFile := func(name, src string, mode int64) {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		hdr := &tar.Header{Name: strings.TrimPrefix(name, "/"), Mode: mode, Size: int64(len(b)), Typeflag: tar.TypeReg}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	addFile(img.copied, bin, 0o755)
	if _, err := os.Stat(caBundle); err == nil {
		addFile(caBundle, caBundle, 0o644)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	layer, err := tarball.LayerFromReader(bytes.NewReader(files.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	oci, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := oci.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture = "linux", runtime.GOARCH
	cfg.Config.User, cfg.Config.Entrypoint = img.user, img.entrypoint
	if oci, err = mutate.ConfigFile(oci, cfg); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.AppendImage(oci); err != nil {
		t.Fatal(err)
	}
	return dir
}

// caBundle is where Debian, and distroless, keep the CA certificates.
const caBundle = "/etc/ssl/certs/ca-certificates.crt"

// unpackImage reads the one image of the OCI layout at dir, checks its configuration
// (non-root user, entrypoint), and extracts its file system into a new directory,
// which it returns.
func unpackImage(t *testing.T, dir string) string {
	t.Helper()
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	m, err := idx.IndexManifest()
	if err != nil || len(m.Manifests) != 1 {
		t.Fatalf("the layout's index: %v, %d images; want 1", err, len(m.Manifests))
	}
	oci, err := idx.Image(m.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := oci.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if uid, _, _ := strings.Cut(cfg.Config.User, ":"); uid == "" || uid == "0" || len(cfg.Config.Entrypoint) != 1 {
		t.Fatalf("image config: user %q, entrypoint %q; want a non-root user and one entrypoint", cfg.Config.User, cfg.Config.Entrypoint)
	}
	root := t.TempDir()
	fs := mutate.Extract(oci)
	defer fs.Close()
	tr := tar.NewReader(fs)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(root, filepath.Clean("/"+hdr.Name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, os.FileMode(hdr.Mode)&os.ModePerm)
		if err != nil {
			t.Fatal(err)
		}
		_, err = io.Copy(f, tr)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return root
}
