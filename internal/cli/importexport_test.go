package cli

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/latch-authz/latch/internal/server"
	"github.com/latch-authz/latch/internal/store/postgres"
	"github.com/latch-authz/latch/internal/store/postgres/pgtest"
)

// TestImportExportRoundTrip backs a server up with export, in both formats, and restores
// each into a fresh server of the same datastore (memory, pebble, PostgreSQL): schema
// and relationships come back; conflicts follow the strategy asked for.
func TestImportExportRoundTrip(t *testing.T) {
	for _, engine := range []string{"memory", "pebble", "postgres"} {
		t.Run(engine, func(t *testing.T) {
			var pg *pgtest.Server
			if engine == "postgres" {
				pg = pgtest.Own(t)
			}
			store := func(c *server.Config) {
				c.DatastoreEngine = engine
				switch engine {
				case "pebble":
					c.DatastoreURI = t.TempDir()
				case "postgres":
					c.DatastoreURI = pg.NewDatabase(t, "latch", postgres.Migrate)
				}
			}
			roundTrip(t, func() string { return startServerWith(t, "k", store) })
		})
	}
}

// roundTrip is TestImportExportRoundTrip on servers newServer starts.
func roundTrip(t *testing.T, newServer func() string) {
	src := newServer()
	schema := "definition user {}\n\ncaveat only(x int) {\n\tx > 1\n}\n\ndefinition doc {\n\trelation viewer: user | user with only\n}"
	dir := t.TempDir()
	text := filepath.Join(dir, "rels.txt")
	if err := os.WriteFile(text, []byte("// two documents\ndoc:a#viewer@user:ann\n\ndoc:b#viewer@user:bob[only:{\"x\":2}]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	backupText, backupJSONL := filepath.Join(dir, "backup.txt"), filepath.Join(dir, "backup.jsonl")
	from := map[string]string{"LATCH_ENDPOINT": src, "LATCH_TOKEN": "k"}
	want := "doc:a#viewer@user:ann\ndoc:b#viewer@user:bob[only:{\"x\":2}]\n"
	header := `// latch export at revision \S+\n// schema:\n//\| caveat only\(x int\) \{\n`
	runSteps(t, from, []step{
		{args: []string{"schema", "write", "-"}, stdin: schema, outRE: token},
		{args: []string{"import", text}, out: "imported 2 relationships\n", err: "2 relationships sent"},
		{args: []string{"import", text}, code: 1, err: "(AlreadyExists) (nothing was imported)"},
		{args: []string{"import", "--skip-existing", text}, out: "imported 0 relationships (2 already there, skipped)\n", err: "100%"},
		{args: []string{"import", "--touch", text}, out: "imported 2 relationships\n", err: "100%"},
		{args: []string{"import", "--touch", "--skip-existing", text}, code: 1, err: "contradict"},
		{args: []string{"export"}, outRE: "^" + header + `(?s:.*)\n` + regexp.QuoteMeta(want) + "$"},
		{args: []string{"export", "-o", backupText}},
		{args: []string{"export", "-o", backupJSONL}},
	})
	for _, backup := range []string{backupText, backupJSONL} {
		dst := newServer()
		to := map[string]string{"LATCH_ENDPOINT": dst, "LATCH_TOKEN": "k"}
		runSteps(t, to, []step{
			{args: []string{"import", backup}, out: "imported 2 relationships (schema restored)\n", err: "100%"},
			{args: []string{"schema", "read"}, outRE: regexp.QuoteMeta("relation viewer: user | user with only")},
			{args: []string{"export", "doc:a"}, outRE: regexp.QuoteMeta("\ndoc:a#viewer@user:ann\n") + "$"},
			{args: []string{"import", "--skip-existing", "--no-schema", backup}, out: "imported 0 relationships (2 already there, skipped; the backup's schema not written (--no-schema))\n", err: "100%"},
		})
	}
	// A file with a bad line imports nothing, not even its schema.
	dst := newServer()
	runSteps(t, map[string]string{"LATCH_ENDPOINT": dst, "LATCH_TOKEN": "k"}, []step{
		{args: []string{"import", "-"}, stdin: "doc:a#viewer@user:ann\ndoc:c#viewer\n", code: 1, err: "line 2: "},
		{args: []string{"schema", "read"}, code: 1, err: "NotFound"},
	})
}
