package validationfile

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// conformanceDir finds ../shared/conformance/spicedb beside the repository root (the
// directory holding go.mod). Without it the test is skipped, except under CI=true,
// where missing conformance data is a broken checkout.
func conformanceDir(t *testing.T) string {
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
	conf := filepath.Join(dir, "..", "shared", "conformance", "spicedb")
	if _, err := os.Stat(conf); errors.Is(err, fs.ErrNotExist) {
		if os.Getenv("CI") == "true" {
			t.Fatalf("conformance data %s is missing: CI needs ../shared beside the repository", conf)
		}
		t.Skipf("conformance data %s is missing (no ../shared beside the repository); skipping", conf)
	}
	return conf
}

// TestConformance runs every SpiceDB validation file in-process: every assertion must
// hold, and nothing may be left unchecked.
func TestConformance(t *testing.T) {
	dir := conformanceDir(t)
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no validation files in %s (%v)", dir, err)
	}
	for _, path := range files {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".yaml"), func(t *testing.T) {
			t.Parallel()
			f, err := Load(path)
			if err != nil {
				t.Fatal(err)
			}
			rep, err := Run(context.Background(), f)
			if err != nil {
				t.Fatal(err)
			}
			for _, fail := range rep.Failures {
				t.Error(fail.String())
			}
			for _, u := range rep.Unchecked {
				t.Error(u)
			}
		})
	}
}
