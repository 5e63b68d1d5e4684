package server

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// zedTimeout bounds every zed invocation; a watch is stopped by the test well before.
const zedTimeout = 30 * time.Second

// zed runs the real zed CLI (../shared/bin/zed, which cannot be installed from the Go
// module proxy) against one server, with a home of its own so that no zed context or
// keyring of the machine is read or written.
type zed struct {
	bin, endpoint, home string
}

func newZed(t *testing.T, ts *testServer) zed {
	t.Helper()
	return zed{bin: sharedPath(t, "bin", "zed"), endpoint: ts.grpcAddr, home: t.TempDir()}
}

// command is zed with the connection flags, then args. zed's own version check stays
// on: it asks the server for its version, as it does with every real deployment.
func (z zed) command(ctx context.Context, args ...string) *exec.Cmd {
	flags := []string{"--endpoint", z.endpoint, "--token", testKey, "--insecure", "--max-retries", "0"}
	cmd := exec.CommandContext(ctx, z.bin, append(flags, args...)...)
	cmd.Env = append(os.Environ(), "HOME="+z.home, "XDG_CONFIG_HOME="+z.home, "NO_COLOR=1")
	cmd.WaitDelay = time.Second
	return cmd
}

// run runs zed to completion and returns its stdout; a failure fails the test with
// zed's stderr.
func (z zed) run(t *testing.T, args ...string) string {
	t.Helper()
	out, stderr, err := z.exec(args...)
	if err != nil {
		t.Fatalf("zed %s: %v\nstdout: %s\nstderr: %s", strings.Join(args, " "), err, out, stderr)
	}
	return out
}

func (z zed) exec(args ...string) (stdout, stderr string, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), zedTimeout)
	defer cancel()
	cmd := z.command(ctx, args...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err = cmd.Run()
	return o.String(), e.String(), err
}

// expect runs zed and compares its stdout with want.
func (z zed) expect(t *testing.T, want string, args ...string) {
	t.Helper()
	if got := z.run(t, args...); got != want {
		t.Errorf("zed %s:\n got %q\nwant %q", strings.Join(args, " "), got, want)
	}
}

// expectLines compares zed's stdout lines, in any order (lookups stream in no set
// order), leaving out the pagination cursor line.
func (z zed) expectLines(t *testing.T, want []string, args ...string) {
	t.Helper()
	var got []string
	for _, l := range strings.Split(strings.TrimSpace(z.run(t, args...)), "\n") {
		if !strings.HasPrefix(l, "Last cursor: ") {
			got = append(got, l)
		}
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("zed %s:\n got %q\nwant %q", strings.Join(args, " "), got, want)
	}
}

const zedSchema = `definition user {}

caveat min_level(required int, level int) {
	level >= required
}

definition group {
	relation member: user | group#member
}

definition document {
	relation viewer: user | user:* | group#member | user with min_level
	relation editor: user
	permission view = viewer + edit
	permission edit = editor
}`

// What SpiceDB 1.56's ReadSchema returns for zedSchema, as zed prints it.
const zedSchemaRead = `caveat min_level(level int, required int) {
	level >= required
}

definition document {
	relation viewer: user | user:* | group#member | user with min_level
	relation editor: user
	permission view = viewer + edit
	permission edit = editor
}

definition group {
	relation member: user | group#member
}

definition user {}
`

// TestZedCLI drives the real zed against latch as a SpiceDB user would, each
// expected output being what zed prints against SpiceDB 1.56 for the same calls.
func TestZedCLI(t *testing.T) {
	ts := start(t, nil)
	z := newZed(t, ts)
	dir := t.TempDir()
	schemaFile := filepath.Join(dir, "schema.zed")
	if err := os.WriteFile(schemaFile, []byte(zedSchema), 0o600); err != nil {
		t.Fatal(err)
	}
	if out := z.run(t, "version"); !strings.Contains(out, "service: ") || strings.Contains(out, "(unknown)") {
		t.Errorf("zed version does not name the server's version:\n%s", out)
	}
	z.run(t, "schema", "write", schemaFile)
	z.expect(t, zedSchemaRead, "schema", "read")

	if tok := z.run(t, "relationship", "create", "document:d1", "viewer", "group:g1#member"); strings.TrimSpace(tok) == "" {
		t.Error("relationship create printed no token")
	}
	if _, stderr, err := z.exec("relationship", "create", "document:d1", "viewer", "group:g1#member"); err == nil || !strings.Contains(stderr, "AlreadyExists") {
		t.Errorf("creating an existing relationship: %v, stderr %q; want AlreadyExists", err, stderr)
	}
	z.run(t, "relationship", "touch", "group:g1", "member", "user:u1")
	z.run(t, "relationship", "touch", "document:d1", "editor", "user:u2")
	z.run(t, "relationship", "touch", "document:d2", "viewer", "user:u3", "--caveat", `min_level:{"required":3}`)
	z.run(t, "relationship", "touch", "document:d3", "viewer", "user:*")
	const full = "--consistency-full"
	z.expect(t, "document:d1 editor user:u2\ndocument:d1 viewer group:g1#member\n"+
		"document:d2 viewer user:u3[min_level:{\"required\":3}]\ndocument:d3 viewer user:*\n", "relationship", "read", "document", full)

	z.expect(t, "true\n", "permission", "check", "document:d1", "view", "user:u1", full)
	z.expect(t, "false\n", "permission", "check", "document:d1", "view", "user:u9", full)
	z.expect(t, "caveated\n", "permission", "check", "document:d2", "view", "user:u3", full)
	z.expect(t, "true\n", "permission", "check", "document:d2", "view", "user:u3", "--caveat-context", `{"level":5}`, full)
	z.expect(t, "true\n", "permission", "check", "document:d3", "view", "user:anyone", full)
	if out := z.run(t, "permission", "check", "document:d1", "view", "user:u1", "--json", full); !strings.Contains(out, `"permissionship": "PERMISSIONSHIP_HAS_PERMISSION"`) {
		t.Errorf("check --json: %s", out)
	}

	z.expect(t, "document:d1#view@user:u1 => true\ndocument:d2#view@user:u1 => false\ndocument:d3#view@user:u7 => true\n",
		"permission", "bulk", "document:d1#view@user:u1", "document:d2#view@user:u1", "document:d3#view@user:u7", full)

	z.expectLines(t, []string{"d1", "d3"}, "permission", "lookup-resources", "document", "view", "user:u1", full)
	z.expectLines(t, []string{"d2 (caveated, missing context: level)", "d3"}, "permission", "lookup-resources", "document", "view", "user:u3", full)
	z.expectLines(t, []string{"user:u1", "user:u2"}, "permission", "lookup-subjects", "document:d1", "view", "user", full)
	z.expectLines(t, []string{"user:*"}, "permission", "lookup-subjects", "document:d3", "view", "user", full)
	z.expectLines(t, []string{"user:u3 (caveated, missing context: level)"}, "permission", "lookup-subjects", "document:d2", "view", "user", full)
	z.expect(t, `document:d1->view
└── union
    ├── document:d1->viewer
    │   └── group:g1->member
    └── document:d1->edit
        └── union
            └── document:d1->editor
                └── user:u2

`, "permission", "expand", "view", "document:d1", full)

	deleted := strings.TrimSpace(z.run(t, "relationship", "delete", "document:d1", "editor", "user:u2"))
	z.expect(t, "document:d1 viewer group:g1#member\n", "relationship", "read", "document:d1", full)

	z.watchSeesTouch(t, deleted, schemaFile)
	z.backupRestores(t, dir)
}

// TestZedImport loads a validation file's schema and relationships with zed import.
func TestZedImport(t *testing.T) {
	z := newZed(t, start(t, nil))
	file := filepath.Join(t.TempDir(), "import.yaml")
	data := "schema: |-\n" +
		"  definition user {}\n" +
		"  definition doc {\n" +
		"    relation viewer: user\n" +
		"    permission view = viewer\n" +
		"  }\n" +
		"relationships: |-\n" +
		"  doc:a#viewer@user:x\n" +
		"  doc:b#viewer@user:y\n"
	if err := os.WriteFile(file, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	z.run(t, "import", file)
	z.expect(t, "definition doc {\n\trelation viewer: user\n\tpermission view = viewer\n}\n\ndefinition user {}\n", "schema", "read")
	z.expect(t, "doc:a viewer user:x\ndoc:b viewer user:y\n", "relationship", "read", "doc", "--consistency-full")
}

// watchSeesTouch runs `zed relationship watch` from revision after, touches and
// deletes a relationship and writes the schema again, and waits for the watch to
// print all three.
func (z zed) watchSeesTouch(t *testing.T, after, schemaFile string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), zedTimeout)
	defer cancel()
	// From a revision, so that the writes below come after the watch's start whenever
	// the stream is set up.
	cmd := z.command(ctx, "relationship", "watch", "--revision", after)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			case <-ctx.Done():
				return
			}
		}
	}()
	// However the test ends (a failed write included), zed is stopped and waited for
	// and the reader goroutine ends.
	defer func() {
		cancel()
		for range lines {
		}
		_ = cmd.Wait()
	}()
	z.run(t, "relationship", "touch", "document:d9", "viewer", "user:w1")
	z.run(t, "relationship", "delete", "document:d9", "viewer", "user:w1")
	z.run(t, "schema", "write", schemaFile)
	want := []string{"TOUCHED document:d9 viewer user:w1", "DELETED document:d9 viewer user:w1", "SCHEMA UPDATED"}
	var got []string
	for len(got) < len(want) {
		l, ok := <-lines
		if !ok {
			t.Errorf("zed relationship watch ended after %q; stderr: %s", got, stderr.String())
			break
		}
		if strings.HasPrefix(l, "TOUCHED ") || strings.HasPrefix(l, "DELETED ") || l == "SCHEMA UPDATED" {
			got = append(got, l)
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("zed relationship watch printed %q, want %q", got, want)
	}
}

// backupRestores backs the server up with zed, restores the backup into a fresh
// server, and compares what the two hold.
func (z zed) backupRestores(t *testing.T, dir string) {
	t.Helper()
	backup := filepath.Join(dir, "latch.zedbackup")
	z.run(t, "backup", "create", backup)
	fresh := start(t, nil)
	z2 := zed{bin: z.bin, endpoint: fresh.grpcAddr, home: z.home}
	z2.run(t, "backup", "restore", backup)
	z2.expect(t, zedSchemaRead, "schema", "read")
	for _, typ := range []string{"document", "group"} {
		want := z.run(t, "relationship", "read", typ, "--consistency-full")
		z2.expect(t, want, "relationship", "read", typ, "--consistency-full")
	}
	z2.expect(t, "caveated\n", "permission", "check", "document:d2", "view", "user:u3", "--consistency-full")
}

// TestZedMigratingFromSpiceDB drives, through zed, what a user moving from SpiceDB
// meets (issue 30): a ZedToken SpiceDB issued reads at the head with
// --consistency-at-least and is refused, saying why, with --consistency-at-exactly;
// SpiceDB's messages for CREATE of an existing relationship and for a schema parse
// error, with its line and column.
func TestZedMigratingFromSpiceDB(t *testing.T) {
	ts := start(t, func(c *Config) { c.QuantizationWindow = time.Hour })
	z := newZed(t, ts)
	dir := t.TempDir()
	schemaFile := filepath.Join(dir, "schema.zed")
	if err := os.WriteFile(schemaFile, []byte(zedSchema), 0o600); err != nil {
		t.Fatal(err)
	}
	z.run(t, "schema", "write", schemaFile)
	z.run(t, "relationship", "touch", "group:g1", "member", "user:u1")
	z.run(t, "relationship", "create", "document:d1", "viewer", "group:g1#member")

	// SpiceDB v1.56's token for revision 1795738809865076928 of datastore "ae7fd619".
	const spicedbToken = "Gh8KEzE3OTU3Mzg4MDk4NjUwNzY5MjgSCGFlN2ZkNjE5"
	z.expect(t, "true\n", "permission", "check", "document:d1", "view", "user:u1", "--consistency-at-least", spicedbToken)
	_, stderr, err := z.exec("permission", "check", "document:d1", "view", "user:u1", "--consistency-at-exactly", spicedbToken)
	if err == nil || !strings.Contains(stderr, "FailedPrecondition") || !strings.Contains(stderr, "issued by SpiceDB") {
		t.Errorf("check at exactly a SpiceDB token: %v, stderr %q; want FailedPrecondition saying the token is SpiceDB's", err, stderr)
	}
	_, stderr, err = z.exec("permission", "check", "document:d1", "view", "user:u1", "--consistency-at-least", "bm90IGEgdG9rZW4=")
	if err == nil || !strings.Contains(stderr, "InvalidArgument") || !strings.Contains(stderr, "invalid revision requested") {
		t.Errorf("check at least as fresh as garbage: %v, stderr %q; want InvalidArgument", err, stderr)
	}

	_, stderr, err = z.exec("relationship", "create", "document:d1", "viewer", "group:g1#member")
	if err == nil || !strings.Contains(stderr, "could not CREATE relationship `document:d1#viewer@group:g1#member`, as it already existed. If this is persistent, please switch to TOUCH operations or specify a precondition") {
		t.Errorf("creating an existing relationship: %v, stderr %q; want SpiceDB's message", err, stderr)
	}

	bad := filepath.Join(dir, "bad.zed")
	if err := os.WriteFile(bad, []byte("definition user {}\ndefinition doc {\n\trelation viewer user\n}"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, stderr, err = z.exec("schema", "write", bad)
	if err == nil || !strings.Contains(stderr, "parse error in `schema`, line 3, column 18: ") {
		t.Errorf("writing a schema with a syntax error: %v, stderr %q; want SpiceDB's parse error with line and column", err, stderr)
	}
}

// TestZedBackupAcrossSpiceDB: a backup zed takes of latch restores into SpiceDB, and
// one it takes of SpiceDB restores into latch, schema, caveats and relationships alike.
func TestZedBackupAcrossSpiceDB(t *testing.T) {
	spicedb := startSpiceDB(t)
	ts := start(t, nil)
	latch := newZed(t, ts)
	sdb := zed{bin: latch.bin, endpoint: spicedb.addr, home: t.TempDir()}
	schemaFile := filepath.Join(t.TempDir(), "schema.zed")
	schema := "caveat only(level int) {\n  level > 1\n}\n\ndefinition user {}\n\ndefinition document {\n  relation viewer: user | user with only\n  permission view = viewer\n}\n"
	if err := os.WriteFile(schemaFile, []byte(schema), 0o600); err != nil {
		t.Fatal(err)
	}
	latch.run(t, "schema", "write", schemaFile)
	latch.run(t, "relationship", "create", "document:d1", "viewer", "user:u1")
	latch.run(t, "relationship", "create", "document:d2", "viewer", "user:u2", "--caveat", `only:{"level":2}`)
	read := func(z zed) string { return z.run(t, "relationship", "read", "document", "--consistency-full") }
	want := read(latch)

	dir := t.TempDir()
	fromLatch := filepath.Join(dir, "from-latch.zedbackup")
	latch.run(t, "backup", "create", fromLatch)
	sdb.run(t, "backup", "restore", fromLatch)
	if got := read(sdb); got != want {
		t.Fatalf("SpiceDB restored from latch's backup holds\n%s\nwant\n%s", got, want)
	}
	sdb.expect(t, "true\n", "permission", "check", "document:d1", "view", "user:u1", "--consistency-full")

	fromSpiceDB := filepath.Join(dir, "from-spicedb.zedbackup")
	sdb.run(t, "backup", "create", fromSpiceDB)
	fresh := newZed(t, start(t, nil))
	fresh.run(t, "backup", "restore", fromSpiceDB)
	if got := read(fresh); got != want {
		t.Fatalf("latch restored from SpiceDB's backup holds\n%s\nwant\n%s", got, want)
	}
	fresh.expect(t, "true\n", "permission", "check", "document:d1", "view", "user:u1", "--consistency-full")
	// true only with the relationship's own caveat context, which came along
	fresh.expect(t, "true\n", "permission", "check", "document:d2", "view", "user:u2", "--consistency-full")
}
