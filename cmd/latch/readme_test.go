package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/latch-authz/latch/internal/store/postgres/pgtest"
)

// readmeSection is a section of the README whose shell blocks start servers: its
// blocks run in order as one script, as a reader would type them.
type readmeSection struct {
	heading string
	script  string
}

// startsServer matches a command line that starts a server.
var startsServer = regexp.MustCompile(`(?m)^(latch|go run \./cmd/latch) serve\b`)

// readmeServerSections returns the README's sections (by heading) that start a server
// with `latch serve` or `go run ./cmd/latch serve` in a ```sh block.
func readmeServerSections(t *testing.T, readme string) []readmeSection {
	t.Helper()
	var out []readmeSection
	var heading string
	var blocks []string
	var block strings.Builder
	inBlock, isShell := false, false
	flush := func() {
		joined := strings.Join(blocks, "\n")
		if startsServer.MatchString(joined) {
			out = append(out, readmeSection{heading: heading, script: joined})
		}
		blocks = nil
	}
	heading1to3 := regexp.MustCompile(`^#{1,3} `)
	for _, line := range strings.Split(readme, "\n") {
		switch {
		case strings.HasPrefix(line, "```") && !inBlock:
			inBlock, isShell = true, strings.TrimPrefix(line, "```") == "sh"
			block.Reset()
		case strings.HasPrefix(line, "```"):
			inBlock = false
			if isShell {
				blocks = append(blocks, block.String())
			}
		case inBlock:
			block.WriteString(line + "\n")
		case heading1to3.MatchString(line):
			flush()
			heading = line
		}
	}
	flush()
	return out
}

// readmePrelude makes the README's commands run as written against the binary under
// test: `latch serve` starts the server in the background and returns once it listens
// (failing if it exits first), `go run ./cmd/latch` is the binary, and placeholder
// lines a reader fills in by hand (`export LATCH_TOKEN=...`) are not in these sections.
const readmePrelude = `set -euo pipefail
n=0
latch() {
  if [ "$1" = serve ]; then
    n=$((n+1))
    "$LATCH_BIN" "$@" >"$LOGS/serve.$n.log" 2>&1 &
    local pid=$!
    echo "$pid" >>"$LOGS/pids"
    for _ in $(seq 600); do
      if grep -q "gRPC API listening" "$LOGS/serve.$n.log"; then return 0; fi
      if ! kill -0 "$pid" 2>/dev/null; then echo "latch serve exited:" >&2; cat "$LOGS/serve.$n.log" >&2; return 1; fi
      sleep 0.1
    done
    echo "latch serve did not start listening" >&2; cat "$LOGS/serve.$n.log" >&2; return 1
  fi
  "$LATCH_BIN" "$@"
}
go() {
  if [ "$1" = run ] && [ "$2" = ./cmd/latch ]; then shift 2; latch "$@"; else command go "$@"; fi
}
`

// TestREADMEServerCommands runs every README block that starts servers, as written
// (loopback addresses only; the cluster recipe on a throwaway PostgreSQL), so that the
// README cannot drift from what latch accepts: the servers must start, stay up, and the
// commands after them must succeed.
func TestREADMEServerCommands(t *testing.T) {
	if testing.Short() {
		t.Skip("builds latch and runs the README's servers as child processes")
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	sections := readmeServerSections(t, string(readme))
	if len(sections) < 3 {
		t.Fatalf("found %d README sections that start servers, want the quick start, Permify's and the cluster's", len(sections))
	}
	bin := filepath.Join(t.TempDir(), "latch")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("building latch: %v\n%s", err, out)
	}
	for _, sec := range sections {
		t.Run(strings.TrimLeft(sec.heading, "# "), func(t *testing.T) {
			env := []string{"LATCH_BIN=" + bin, "KEY=readme-test-key"}
			if strings.Contains(sec.script, "$PG") {
				env = append(env, "PG="+readmePostgres(t))
			}
			out := runREADMESection(t, sec.script, env)
			if strings.Contains(sec.script, "permissions/check") && !strings.Contains(out, "CHECK_RESULT_ALLOWED") {
				t.Errorf("the Permify example's check did not answer CHECK_RESULT_ALLOWED:\n%s", out)
			}
			if strings.Contains(sec.script, "/access/v1/evaluation") && !strings.Contains(out, `{"decision":true}`) {
				t.Errorf("the AuthZEN example's evaluation did not answer {\"decision\":true}:\n%s", out)
			}
		})
	}
}

// runREADMESection runs script in a directory of its own, checks every server it
// started is still running when it ends, stops them, and returns its output.
func runREADMESection(t *testing.T, script string, env []string) string {
	t.Helper()
	dir, logs := t.TempDir(), t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", readmePrelude+script)
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), "LOGS="+logs), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	runErr := cmd.Run()
	pids, _ := os.ReadFile(filepath.Join(logs, "pids"))
	for _, pid := range strings.Fields(string(pids)) {
		if exec.Command("kill", "-0", pid).Run() != nil {
			t.Errorf("a server the README started (pid %s) is no longer running", pid)
		}
		_ = exec.Command("kill", pid).Run()
	}
	for _, pid := range strings.Fields(string(pids)) {
		for i := 0; i < 100 && exec.Command("kill", "-0", pid).Run() == nil; i++ {
			time.Sleep(100 * time.Millisecond) // let it release its ports for the next section
		}
	}
	if runErr != nil || t.Failed() {
		logFiles, _ := filepath.Glob(filepath.Join(logs, "serve.*.log"))
		for _, f := range logFiles {
			b, _ := os.ReadFile(f)
			t.Logf("%s:\n%s", filepath.Base(f), b)
		}
		t.Fatalf("README commands: %v\n%s", runErr, out.String())
	}
	return out.String()
}

// readmePostgres returns the URI of an empty database on a throwaway PostgreSQL for
// the cluster recipe.
func readmePostgres(t *testing.T) string {
	t.Helper()
	return pgtest.Own(t).NewDatabase(t, "", nil)
}
