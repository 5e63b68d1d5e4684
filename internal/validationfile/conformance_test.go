package validationfile

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// shared returns ../shared/<elem...> beside the repository root (the directory
// holding go.mod). Without it the test is skipped, except under CI=true, where missing
// shared data is a broken checkout.
func shared(t *testing.T, elem ...string) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod in the test's directory or above it")
		}
		dir = parent
	}
	path := filepath.Join(append([]string{dir, "..", "shared"}, elem...)...)
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is missing: CI needs ../shared beside the repository", path)
		}
		t.Skipf("%s is missing (no ../shared beside the repository); skipping", path)
	}
	return path
}

func conformanceDir(t *testing.T, sub string) string {
	t.Helper()
	return shared(t, "conformance", sub)
}

// TestConformance runs every validation file in-process: SpiceDB's own (assertions)
// and those written for latch and checked with zed (assertions and expected
// relations). Every item must hold. v1-wrong.yaml is left to TestConformanceWrong.
func TestConformance(t *testing.T) {
	var files []string
	for _, sub := range []string{"spicedb", "validation"} {
		dir := conformanceDir(t, sub)
		found, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
		if err != nil || len(found) == 0 {
			t.Fatalf("no validation files in %s (%v)", dir, err)
		}
		for _, f := range found {
			if !strings.HasSuffix(f, "-wrong.yaml") {
				files = append(files, f)
			}
		}
	}
	for _, path := range files {
		t.Run(filepath.Base(filepath.Dir(path))+"/"+strings.TrimSuffix(filepath.Base(path), ".yaml"), func(t *testing.T) {
			t.Parallel()
			rep := runPath(t, path)
			for _, fail := range rep.Failures {
				t.Error(fail.String())
			}
		})
	}
}

func runPath(t *testing.T, path string) Report {
	t.Helper()
	f, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Run(context.Background(), f)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// TestConformanceWrong: v1-wrong.yaml differs from v1.yaml in one expected relation,
// and fails there alone, at the line zed's output beside it names.
func TestConformanceWrong(t *testing.T) {
	dir := conformanceDir(t, "validation")
	zedOut, err := os.ReadFile(filepath.Join(dir, "v1-wrong.zed-output.txt"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`, line (\d+), column`).FindSubmatch(zedOut)
	if m == nil {
		t.Fatalf("no line in zed's output:\n%s", zedOut)
	}
	rep := runPath(t, filepath.Join(dir, "v1-wrong.yaml"))
	if len(rep.Failures) != 1 {
		t.Fatalf("failures:\n%v\nwant exactly one", rep.Failures)
	}
	got := rep.Failures[0]
	want := "v1-wrong.yaml:" + string(m[1]) + ": document:draft#delete: expected [user:ivan] is <document:draft#owner>, found no subject user:ivan"
	if !strings.HasSuffix(got.String(), want) {
		t.Errorf("failure = %q, want suffix %q", got.String(), want)
	}
}
