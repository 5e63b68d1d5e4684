package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	// bench run --target empty runs its own binary, this test binary here, as
	// `latch bench empty-server`.
	if len(os.Args) > 2 && os.Args[1] == "bench" && os.Args[2] == "empty-server" {
		os.Exit(Main(context.Background(), os.Args[1:], OSEnv()))
	}
	goleak.VerifyTestMain(m)
}

// syncBuffer is a bytes.Buffer safe to write from a command's goroutine while a test reads.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// result is what one command run printed and returned.
type result struct {
	code     int
	out, err string
}

// invocation describes a command run: its standard input and environment.
type invocation struct {
	stdin string
	env   map[string]string
}

func (inv invocation) run(ctx context.Context, args ...string) result {
	var out, errOut syncBuffer
	env := Env{
		In:     strings.NewReader(inv.stdin),
		Out:    &out,
		Err:    &errOut,
		Getenv: func(k string) string { return inv.env[k] },
	}
	code := Main(ctx, args, env)
	return result{code: code, out: out.String(), err: errOut.String()}
}

// latch runs a command with no input and an empty environment.
func latch(t *testing.T, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return invocation{}.run(ctx, args...)
}

func TestUnknownCommandAndFlag(t *testing.T) {
	for _, args := range [][]string{{"frobnicate"}, {"check", "--frob"}, {"check"}} {
		r := latch(t, args...)
		if r.code != 1 || !strings.HasPrefix(r.err, "latch: ") || strings.Count(r.err, "\n") != 1 {
			t.Errorf("latch %v: code %d, stderr %q; want status 1 and one line starting with \"latch: \"", args, r.code, r.err)
		}
	}
}

func TestValidateGoodAndBadFiles(t *testing.T) {
	r := latch(t, "validate", "testdata/good.yaml")
	if r.code != 0 || r.out != "testdata/good.yaml: 3 assertions held\n" {
		t.Errorf("good file: code %d, stdout %q, stderr %q", r.code, r.out, r.err)
	}

	r = latch(t, "validate", "testdata/good.yaml", "testdata/bad.yaml")
	want := []string{
		"testdata/good.yaml: 3 assertions held",
		`testdata/bad.yaml:13: assertTrue "document:readme#view@user:bob": expected HAS_PERMISSION, found NO_PERMISSION`,
		`testdata/bad.yaml:15: assertFalse "document:readme#view@user:alice": expected NO_PERMISSION, found HAS_PERMISSION`,
		"testdata/bad.yaml: 2 failures (3 assertions checked)",
	}
	if r.code != 1 || r.out != strings.Join(want, "\n")+"\n" {
		t.Errorf("bad file: code %d, stdout:\n%s\nwant status 1 and:\n%s", r.code, r.out, strings.Join(want, "\n"))
	}
}

func TestValidateFileProblems(t *testing.T) {
	r := latch(t, "validate", "testdata/badschema.yaml", "testdata/missing.yaml")
	if r.code != 1 {
		t.Errorf("code %d, want 1", r.code)
	}
	for _, want := range []string{
		"testdata/badschema.yaml:5:",
		"testdata/badschema.yaml: not run: ",
		"testdata/missing.yaml: open testdata/missing.yaml: no such file or directory",
	} {
		if !strings.Contains(r.out, want) {
			t.Errorf("stdout %q does not contain %q", r.out, want)
		}
	}
}

func TestValidateUpdate(t *testing.T) {
	src, err := os.ReadFile("testdata/expected.yaml")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "expected.yaml")
	if err := os.WriteFile(path, src, 0o640); err != nil {
		t.Fatal(err)
	}
	r := latch(t, "validate", path)
	want := []string{
		path + `:20: document:readme#view: expected no subject group:eng#member, found [group:eng#member] is <document:readme#viewer>`,
		path + `:21: document:readme#view: expected [user:alice] is <document:readme#viewer>, found [user:alice] is <group:eng#member>`,
		path + `:22: document:public#view: expected no subject user:*, found [user:* - {user:mallory}] is <document:public#viewer>`,
		path + `: 3 failures (1 assertion and 2 expected relations checked)`,
	}
	if r.code != 1 || r.out != strings.Join(want, "\n")+"\n" {
		t.Errorf("before --update: code %d, stdout:\n%s\nwant status 1 and:\n%s", r.code, r.out, strings.Join(want, "\n"))
	}

	r = latch(t, "validate", "--update", path)
	if r.code != 0 || r.out != path+": validation section updated (2 expected relations)\n" {
		t.Errorf("--update: code %d, stdout %q, stderr %q", r.code, r.out, r.err)
	}
	updated, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	section := `validation:
  document:public#view:
    - "[user:* - {user:mallory}] is <document:public#viewer>"
  document:readme#view:
    - "[group:eng#member] is <document:readme#viewer>"
    - "[user:alice] is <group:eng#member>"
`
	before, after, _ := strings.Cut(string(src), "validation:\n")
	_, after, _ = strings.Cut(after, "\n\n")
	if want := before + section + "\n" + after; string(updated) != want {
		t.Errorf("updated file:\n%s\nwant:\n%s", updated, want)
	}
	if info, err := os.Stat(path); err != nil || info.Mode().Perm() != 0o640 {
		t.Errorf("mode after --update: %v, %v; want 0640", info.Mode(), err)
	}

	for args, out := range map[string]string{
		"validate":          path + ": 1 assertion and 2 expected relations held\n",
		"validate --update": path + ": validation section already up to date\n",
	} {
		if r := latch(t, append(strings.Fields(args), path)...); r.code != 0 || r.out != out {
			t.Errorf("%s after --update: code %d, stdout %q, want %q", args, r.code, r.out, out)
		}
	}
	if r := latch(t, "validate", "--update", "testdata/permify.yaml"); r.code != 1 || !strings.Contains(r.out, "not updated: --update rewrites SpiceDB's validation section") {
		t.Errorf("--update of a Permify file: code %d, stdout %q", r.code, r.out)
	}
}
