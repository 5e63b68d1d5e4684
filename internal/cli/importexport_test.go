package cli

import (
	"os"
	"path/filepath"
	"testing"
)

func TestImportExportRoundTrip(t *testing.T) {
	src := startServer(t, "k")
	dst := startServer(t, "k")
	schema := "definition user {}\ncaveat only(x int) { x > 1 }\ndefinition doc {\n\trelation viewer: user | user with only\n}"
	dir := t.TempDir()
	text := filepath.Join(dir, "rels.txt")
	if err := os.WriteFile(text, []byte("// two documents\ndoc:a#viewer@user:ann\n\ndoc:b#viewer@user:bob[only:{\"x\":2}]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	jsonl := filepath.Join(dir, "rels.jsonl")
	from := map[string]string{"LATCH_ENDPOINT": src, "LATCH_TOKEN": "k"}
	to := map[string]string{"LATCH_ENDPOINT": dst, "LATCH_TOKEN": "k"}
	want := "doc:a#viewer@user:ann\ndoc:b#viewer@user:bob[only:{\"x\":2}]\n"
	runSteps(t, from, []step{
		{args: []string{"schema", "write", "-"}, stdin: schema, outRE: token},
		{args: []string{"import", text}, out: "imported 2 relationships\n", err: "2 relationships"},
		{args: []string{"import", text}, code: 1, err: "(AlreadyExists)"},
		{args: []string{"export"}, out: want},
		{args: []string{"export", "doc:a"}, out: "doc:a#viewer@user:ann\n"},
		{args: []string{"export", "-o", jsonl}},
	})
	runSteps(t, to, []step{
		{args: []string{"schema", "write", "-"}, stdin: schema, outRE: token},
		{args: []string{"import", "-"}, stdin: "doc:a#viewer@user:ann\ndoc:c#viewer\n", code: 1, err: "line 2: "},
		{args: []string{"export"}, out: ""},
		{args: []string{"import", jsonl}, out: "imported 2 relationships\n", err: "100%"},
		{args: []string{"export"}, out: want},
	})
}
