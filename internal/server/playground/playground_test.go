package playground

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/latch-authz/latch/internal/validationfile"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const testSession = "0123456789abcdef"

const docSchema = `definition user {}

caveat on_network(ip ipaddress, cidr string) {
  ip.in_cidr(cidr)
}

definition document {
  relation viewer: user | user with on_network
  relation banned: user
  permission view = viewer - banned
}`

// post sends req (as JSON, with the test session unless it names one) to the API.
func post[T any](t *testing.T, h http.Handler, path string, req map[string]any) (int, T) {
	t.Helper()
	if _, ok := req["session"]; !ok {
		req["session"] = testSession
	}
	body, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/playground/api/"+path, bytes.NewReader(body)))
	var out T
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
		t.Fatalf("%s answered %d %q: %v", path, rec.Code, rec.Body, err)
	}
	return rec.Code, out
}

func newHandler(t *testing.T, cfg Config) *Handler {
	h := New(cfg)
	t.Cleanup(h.Close)
	return h
}

func TestAnalyzeMarksSchemaAndRelationshipLines(t *testing.T) {
	h := newHandler(t, Config{})
	code, out := post[analysis](t, h, "analyze", map[string]any{
		"schema": "definition user {}\n\ndefinition document {\n  permission view = nobody\n}",
	})
	if code != http.StatusOK || out.Language != spiceDB || len(out.Schema) != 1 || out.Schema[0].Line != 4 || out.Schema[0].Col == 0 ||
		!strings.Contains(out.Schema[0].Message, "nobody") {
		t.Fatalf("analysis %d %+v: want one error at line 4 naming `nobody`", code, out)
	}
	_, out = post[analysis](t, h, "analyze", map[string]any{
		"schema": docSchema,
		"relationships": "document:1#viewer@user:a\n\n// a comment\ndocument:1#owner@user:a\nnot a relationship\n" +
			"document:1#viewer@user:a\ndocument:2#viewer@user:b[on_network:{\"cidr\":\"10.0.0.0/8\"}]\ndocument:3#viewer@user:c[expiration:2100-01-01T00:00:00Z]",
	})
	var lines []string
	for _, d := range out.Relationships {
		lines = append(lines, fmt.Sprintf("%d %s", d.Line, d.Message))
	}
	want := []string{"4 owner", "5 '@'", "6 duplicate of the relationship on line 1", "8 expiration"}
	if len(lines) != len(want) {
		t.Fatalf("relationship problems %q, want lines %q", lines, want)
	}
	for i, w := range want {
		n, word, _ := strings.Cut(w, " ")
		if !strings.HasPrefix(lines[i], n+" ") || !strings.Contains(lines[i], word) {
			t.Errorf("problem %q, want line %s naming %q", lines[i], n, word)
		}
	}
}

func TestChecksAnswerWithTraces(t *testing.T) {
	h := newHandler(t, Config{})
	code, out := post[checkAnswer](t, h, "check", map[string]any{
		"schema":        docSchema,
		"relationships": "document:1#viewer@user:a\ndocument:1#banned@user:b\ndocument:1#viewer@user:b\ndocument:2#viewer@user:c[on_network:{\"cidr\":\"10.0.0.0/8\"}]",
		"checks": "document:1#view@user:a\n\ndocument:1#view@user:b\ndocument:2#view@user:c\n" +
			"document:2#view@user:c with {\"ip\": \"10.1.2.3\"}\ndocument:1#nope@user:a\ndocument:1view",
	})
	if code != http.StatusOK {
		t.Fatalf("check: %d", code)
	}
	var got []string
	for _, c := range out.Checks {
		got = append(got, fmt.Sprintf("%d %s%s", c.Line, c.Result, c.Error))
	}
	want := []string{
		"1 HAS_PERMISSION", "3 NO_PERMISSION", "4 CONDITIONAL_PERMISSION", "5 HAS_PERMISSION",
		"6 relation/permission `nope` not found under definition `document`",
		"7 check \"document:1view\": missing '@' between the resource and the subject",
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("checks answered\n%q\nwant\n%q", got, want)
	}
	if m := out.Checks[2].Missing; !reflect.DeepEqual(m, []string{"ip"}) {
		t.Errorf("conditional answer misses %v, want [ip]", m)
	}
	// The exclusion's trace names both sides; the caveat's, how it evaluated.
	tr := out.Checks[1].Trace
	if tr == nil || tr.Type != "document" || tr.Relation != "view" || !tr.Permission || tr.Expression != "viewer - banned" || len(tr.Children) != 2 ||
		tr.Children[0].Relation != "viewer" || tr.Children[1].Relation != "banned" || tr.Children[1].Results[0].Result != "HAS_PERMISSION" {
		t.Fatalf("trace of an excluded subject: %+v", tr)
	}
	cav := out.Checks[3].Trace.Children[0].Caveats
	if len(cav) != 1 || cav[0].Caveat != "on_network" || cav[0].Result != "true" || cav[0].Context["cidr"] != "10.0.0.0/8" {
		t.Fatalf("caveat trace %+v, want on_network evaluated true with its stored cidr", cav)
	}
}

func TestChecksWaitForASchemaThatCompiles(t *testing.T) {
	h := newHandler(t, Config{})
	_, out := post[checkAnswer](t, h, "check", map[string]any{"schema": "definition {", "checks": "document:1#view@user:a"})
	if len(out.Schema) == 0 || len(out.Checks) != 1 || !strings.Contains(out.Checks[0].Error, "schema has errors") {
		t.Fatalf("check with a broken schema: %+v", out)
	}
}

func TestRequestsAreBounded(t *testing.T) {
	h := newHandler(t, Config{MaxChecks: 2, MaxRelationships: 2})
	code, out := post[map[string]string](t, h, "check", map[string]any{"schema": docSchema, "checks": "document:1#view@user:a\ndocument:1#view@user:b\ndocument:1#view@user:c"})
	if code != http.StatusBadRequest || !strings.Contains(out["error"], "at most 2 checks") {
		t.Errorf("three checks over a limit of two: %d %v", code, out)
	}
	_, an := post[analysis](t, h, "analyze", map[string]any{"schema": docSchema, "relationships": "document:1#viewer@user:a\ndocument:1#viewer@user:b\ndocument:1#viewer@user:c"})
	if len(an.Relationships) != 1 || an.Relationships[0].Line != 3 || !strings.Contains(an.Relationships[0].Message, "at most 2") {
		t.Errorf("three relationships over a limit of two: %+v", an.Relationships)
	}
	code, _ = post[map[string]string](t, h, "validate", map[string]any{"schema": docSchema, "relationships": "document:1#viewer@user:a\n\ndocument:1#viewer@user:b\ndocument:1#viewer@user:c"})
	if code != http.StatusBadRequest {
		t.Errorf("validating three relationships over a limit of two: %d, want 400", code)
	}
	for _, id := range []string{"", "short", strings.Repeat("x", 65), "0123456789abcdef/"} {
		code, _ := post[map[string]string](t, h, "analyze", map[string]any{"session": id})
		if code != http.StatusBadRequest {
			t.Errorf("session id %q: %d, want 400", id, code)
		}
	}
	for _, path := range []string{"analyze", "validate", "export"} {
		if code, _ := post[map[string]string](t, h, path, map[string]any{"language": "cobol"}); code != http.StatusBadRequest {
			t.Errorf("%s in an unknown language: %d, want 400", path, code)
		}
		big := strings.Repeat("x", maxSchemaBytes+1)
		if code, out := post[map[string]string](t, h, path, map[string]any{"schema": big}); code != http.StatusBadRequest || !strings.Contains(out["error"], "at most") {
			t.Errorf("%s of an oversized schema: %d %v, want 400", path, code, out)
		}
	}
}

func TestSessionsAreEvictedAndExpire(t *testing.T) {
	now := time.Unix(1e9, 0)
	h := newHandler(t, Config{MaxSessions: 2, IdleTimeout: time.Minute, Now: func() time.Time { return now }})
	ids := []string{"aaaaaaaaaaaaaaaa", "bbbbbbbbbbbbbbbb", "cccccccccccccccc"}
	for _, id := range ids {
		now = now.Add(time.Second)
		post[analysis](t, h, "analyze", map[string]any{"session": id, "schema": docSchema})
	}
	if _, kept := h.active[ids[0]]; len(h.active) != 2 || kept {
		t.Fatalf("sessions %v after three of at most two: want the least recently used gone", keys(h.active))
	}
	now = now.Add(2 * time.Minute)
	post[analysis](t, h, "analyze", map[string]any{"session": ids[2], "schema": docSchema})
	if len(h.active) != 1 {
		t.Fatalf("sessions %v after two idle minutes: want only the one just used", keys(h.active))
	}
}

func keys(m map[string]*session) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestValidateReportsEditorLines(t *testing.T) {
	h := newHandler(t, Config{})
	base := map[string]any{
		"schema":        docSchema,
		"relationships": "document:1#viewer@user:a\ndocument:1#banned@user:a",
		"assertions":    "# who sees document 1\nassertTrue:\n  - document:1#view@user:a\nassertFalse:\n  - document:1#viewer@user:b",
		"validation":    "document:1#viewer:\n  - \"[user:a] is <document:1#viewer>\"\ndocument:1#view:\n  - \"[user:a] is <document:1#viewer>\"",
	}
	code, out := post[validation](t, h, "validate", base)
	var got []string
	for _, f := range out.Failures {
		got = append(got, fmt.Sprintf("%s:%d", f.Editor, f.Line))
	}
	if code != http.StatusOK || out.Checked != 4 || strings.Join(got, " ") != "assertions:3 validation:4" ||
		!strings.Contains(out.Failures[0].Message, "expected HAS_PERMISSION, found NO_PERMISSION") {
		t.Fatalf("validate: %d %+v, want failures at assertions line 3 and validation line 4", code, out)
	}
	// The validation section as the answers have it: user:a is banned from view.
	if want := "document:1#view: []\ndocument:1#viewer:\n  - \"[user:a] is <document:1#viewer>\""; out.Expected != want {
		t.Errorf("expected relations regenerated as\n%s\nwant\n%s", out.Expected, want)
	}
	base["relationships"] = "document:1#viewer@user:a\ndocument:1#owner@user:a"
	_, out = post[validation](t, h, "validate", base)
	if len(out.Failures) != 1 || out.Failures[0].Editor != edRelationships || out.Failures[0].Line != 2 {
		t.Fatalf("validate with a bad relationship: %+v, want it at relationships line 2", out)
	}
	base["schema"] = "definition user {}\n\n  definition document {\n  relation viewer: nobody\n}"
	_, out = post[validation](t, h, "validate", base)
	if len(out.Failures) != 1 || out.Failures[0].Editor != edSchema || out.Failures[0].Line != 4 {
		t.Fatalf("validate with a bad schema: %+v, want it at schema line 4", out)
	}
}

func TestExportImportRoundTrip(t *testing.T) {
	h := newHandler(t, Config{})
	cases := []map[string]any{
		{
			"schema": docSchema, "relationships": "document:1#viewer@user:a\n\n// comment\ndocument:1#banned@user:b",
			"assertions": "assertTrue:\n  # why\n  - document:1#view@user:a\nassertFalse: [document:1#view@user:b]",
			"validation": "document:1#view:\n  - \"[user:a] is <document:1#viewer>\"",
		},
		{"schema": "  definition user {}\n", "relationships": "\n\ndocument:1#viewer@user:a\n\n\n"},
		{"schema": "", "relationships": ""},
		{
			"language": permify, "schema": "entity user {}\n\nentity doc {\n  relation viewer @user\n  permission view = viewer\n}",
			"relationships": "doc:1#viewer@user:a\ndoc:2#viewer@user:b",
			"assertions":    "- name: viewers\n  checks:\n    - entity: doc:1\n      subject: user:a\n      assertions:\n        view: true",
		},
	}
	for i, c := range cases {
		_, exp := post[exported](t, h, "export", c)
		_, got := post[imported](t, h, "import", map[string]any{"file": exp.YAML})
		want := imported{Language: spiceDB, Schema: c["schema"].(string), Relationships: c["relationships"].(string)}
		if c["language"] != nil {
			want.Language = permify
		}
		want.Assertions, _ = c["assertions"].(string)
		want.Validation, _ = c["validation"].(string)
		if got != want {
			t.Errorf("case %d: exported\n%s\nimported as %+v\nwant %+v", i, exp.YAML, got, want)
		}
	}
	// The file is what `latch validate` reads: its relationships and assertions line up.
	_, exp := post[exported](t, h, "export", cases[0])
	f, err := validationfile.Parse("x.yaml", []byte(exp.YAML))
	if err != nil || f.Schema != docSchema || len(f.Relationships) != 2 || len(f.Assertions) != 2 || len(f.Validation) != 1 {
		t.Fatalf("exported file parses as %+v, %v", f, err)
	}
}

func TestImportRejectsWhatThePlaygroundCannotHold(t *testing.T) {
	h := newHandler(t, Config{})
	for file, want := range map[string]string{
		"schemaFile: a.zed\n": "cannot read other files",
		"- a\n- b\n":          "expected a mapping",
		"schema: [\n":         "not a validation file",
		"other: 1\n":          `unknown key "other"`,
	} {
		code, out := post[map[string]string](t, h, "import", map[string]any{"file": file})
		if code != http.StatusBadRequest || !strings.Contains(out["error"], want) {
			t.Errorf("import %q: %d %v, want 400 mentioning %q", file, code, out, want)
		}
	}
}

func TestPermifyLanguage(t *testing.T) {
	h := newHandler(t, Config{})
	schema := "entity user {}\n\nentity doc {\n  relation owner @user\n  relation viewer @user\n  action view = viewer or owner\n}"
	_, out := post[checkAnswer](t, h, "check", map[string]any{
		"schema": schema, "relationships": "doc:1#owner@user:a", "checks": "doc:1#view@user:a",
	})
	if out.Language != permify || len(out.Checks) != 1 || out.Checks[0].Result != "HAS_PERMISSION" {
		t.Fatalf("Permify schema check: %+v", out)
	}
	_, v := post[validation](t, h, "validate", map[string]any{
		"schema": schema, "relationships": "doc:1#owner@user:a",
		"assertions": "- name: owners\n  checks:\n    - entity: doc:1\n      subject: user:a\n      assertions:\n        view: true\n    - entity: doc:1\n      subject: user:b\n      assertions:\n        view: true",
	})
	if v.Checked == 0 || len(v.Failures) != 1 || v.Failures[0].Editor != edAssertions || v.Failures[0].Line != 10 {
		t.Fatalf("Permify scenarios: %+v, want one failure at scenarios line 10, its view: true", v)
	}
}

// TestPermifyAttributes: Permify attributes are lines of the relationships editor;
// checks and scenarios read them, a bad one is marked at its line, and they travel in
// the file's attributes list.
func TestPermifyAttributes(t *testing.T) {
	h := newHandler(t, Config{})
	schema := "entity user {}\n\nentity doc {\n  relation owner @user\n  attribute public boolean\n  attribute level integer\n" +
		"  permission view = public or (owner and low(level))\n}\n\nrule low(level integer) {\n  level <= 2\n}"
	rels := "doc:1#owner@user:a\ndoc:2#owner@user:a\ndoc:3$public|boolean:true\ndoc:1$level|integer:1\ndoc:2$level|integer:5\ndoc:4$colour|string:red\ndoc:4$public|integer:1"
	req := map[string]any{"schema": schema, "relationships": rels, "checks": "doc:3#view@user:z\ndoc:1#view@user:a\ndoc:2#view@user:a"}
	_, out := post[checkAnswer](t, h, "check", req)
	var got []string
	for _, c := range out.Checks {
		got = append(got, c.Result+c.Error)
	}
	if want := []string{"HAS_PERMISSION", "HAS_PERMISSION", "NO_PERMISSION"}; !reflect.DeepEqual(got, want) {
		t.Errorf("checks over attributes answered %q, want %q", got, want)
	}
	if len(out.Relationships) != 2 || out.Relationships[0].Line != 6 || !strings.Contains(out.Relationships[0].Message, "colour") || out.Relationships[1].Line != 7 {
		t.Errorf("attribute problems %+v, want the unknown attribute on line 6 and the integer for a boolean on line 7", out.Relationships)
	}
	req["relationships"] = strings.Join(strings.Split(rels, "\n")[:5], "\n")
	req["assertions"] = "- name: levels\n  checks:\n    - entity: doc:1\n      subject: user:a\n      assertions:\n        view: true\n    - entity: doc:2\n      subject: user:a\n      assertions:\n        view: false"
	if _, v := post[validation](t, h, "validate", req); v.Checked != 2 || len(v.Failures) != 0 {
		t.Errorf("scenarios over attributes: %+v, want 2 checked, none failed", v)
	}
	_, exp := post[exported](t, h, "export", req)
	if !strings.Contains(exp.YAML, "attributes:\n  - \"doc:3$public|boolean:true\"") {
		t.Errorf("exported file has no attributes list:\n%s", exp.YAML)
	}
	if _, back := post[imported](t, h, "import", map[string]any{"file": exp.YAML}); back.Relationships != req["relationships"] || back.Language != permify {
		t.Errorf("imported back relationships %q (%s), want %q", back.Relationships, back.Language, req["relationships"])
	}
}
