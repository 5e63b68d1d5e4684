package server

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	v1 "github.com/authzed/authzed-go/proto/authzed/api/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"
)

// The hostile-input suite: each input that once crashed or starved a node, sent to
// every listener that takes it, plus the fuzz corpora of the parsers behind them. The
// process must survive, answer the documented code, still serve a check afterwards,
// and give its memory back. Other suites add their rows in files of their own.

// hostileHeapSlack is how far the live heap may stay above its level before the suite:
// the schema caches keep a few compiled schemas of the sizes sent here.
const hostileHeapSlack = 256 << 20

// hostileRow is one hostile input on one listener; send returns what it was answered
// as "<code> <reason>" (a gRPC code name, or an HTTP status and the reason or code).
type hostileRow struct {
	listener, name string
	send           func(t *testing.T, ts *testServer) string
	want           string
}

const hostileZedBase = "definition user {}\ndefinition document {\n\trelation viewer: user\n\tpermission view = "

const hostilePermBase = "entity user {}\nentity document {\n\trelation viewer @user\n\tpermission view = "

func deepParens(n int) string {
	return strings.Repeat("(", n) + "viewer" + strings.Repeat(")", n)
}

func chain(n int, op string) string { return "viewer" + strings.Repeat(" "+op+" viewer", n-1) }

func TestHostileInputs(t *testing.T) {
	ts := start(t, nil)
	ts.writeSchema(t, hostileZedBase+"viewer\n}")
	base := heapInUse()
	rows := hostileRows()
	rows = append(rows, corpusRows(t)...)
	for _, r := range rows {
		t.Run(r.listener+"/"+r.name, func(t *testing.T) {
			if got := r.send(t, ts); got != r.want && !strings.HasPrefix(got, r.want+" ") {
				t.Errorf("answered %q, want %q", clipAnswer(got), r.want)
			}
		})
	}
	// The node survived and still answers.
	ts.writeSchema(t, hostileZedBase+"viewer\n}")
	ts.write(t, relationship("document", "1", "viewer", "user", "alice", ""))
	resp, err := ts.check(t, fullyConsistent(), obj("document", "1"), "view", sub("user", "alice", ""))
	if err != nil || resp.GetPermissionship() != v1.CheckPermissionResponse_PERMISSIONSHIP_HAS_PERMISSION {
		t.Fatalf("after the hostile inputs a check answers %v, %v", resp, err)
	}
	if after := heapInUse(); after > base+hostileHeapSlack {
		t.Errorf("live heap %d MB after the suite, %d MB before: more than %d MB was kept", after>>20, base>>20, hostileHeapSlack>>20)
	} else {
		t.Logf("live heap %d MB after the suite, %d MB before", after>>20, base>>20)
	}
}

func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

func clipAnswer(s string) string {
	if len(s) > 300 {
		return s[:300] + "..."
	}
	return s
}

func hostileRows() []hostileRow {
	var rows []hostileRow
	grpcSchema := func(src string) func(*testing.T, *testServer) string {
		return func(t *testing.T, ts *testServer) string {
			_, err := ts.schema.WriteSchema(ctxT(t), &v1.WriteSchemaRequest{Schema: src})
			return status.Code(err).String()
		}
	}
	rows = append(rows,
		hostileRow{"grpc", "1,000,000 nested parentheses", grpcSchema(hostileZedBase + deepParens(1_000_000) + "\n}"), "InvalidArgument"},
		hostileRow{"grpc", "a union of 100,000 terms", grpcSchema(hostileZedBase + chain(100_000, "+") + "\n}"), "OK"},
		hostileRow{"grpc", "an exclusion chain of 50,000 terms", grpcSchema(hostileZedBase + chain(50_000, "-") + "\n}"), "InvalidArgument"},
		hostileRow{"grpc", "a caveat nested 300 deep", grpcSchema("caveat c(a bool) { " + strings.Repeat("(", 300) + "a" + strings.Repeat(")", 300) + " }\n" + hostileZedBase + "viewer\n}"), "InvalidArgument"},
		hostileRow{"grpc", "a compile past its deadline", writeSchemaPastDeadline, "DeadlineExceeded"},
		hostileRow{"grpc", "a check of an exclusion chain 200 deep", checkLongChain, "OK"},
		hostileRow{"grpc", "a caveat context nested 20,000 deep", checkDeepContext, "InvalidArgument"},
	)
	gatewaySchema := func(src string) func(*testing.T, *testServer) string {
		return func(t *testing.T, ts *testServer) string {
			body, _ := json.Marshal(map[string]string{"schema": src})
			return httpAnswer(t, ts, "/v1/schema/write", testKey, strings.NewReader(string(body)))
		}
	}
	rows = append(rows,
		hostileRow{"gateway", "1,000,000 nested parentheses", gatewaySchema(hostileZedBase + deepParens(1_000_000) + "\n}"), "400"},
		hostileRow{"gateway", "a union of 100,000 terms", gatewaySchema(hostileZedBase + chain(100_000, "+") + "\n}"), "200"},
		hostileRow{"gateway", "JSON nested 100,000 deep", func(t *testing.T, ts *testServer) string {
			return httpAnswer(t, ts, "/v1/schema/write", testKey, strings.NewReader(strings.Repeat("[", 100_000)))
		}, "400"},
		hostileRow{"gateway", "an oversized chunked body", oversized("/v1/schema/write", true), "413"},
		hostileRow{"gateway", "an oversized sized body", oversized("/v1/schema/write", false), "413"},
	)
	rows = append(rows, permifyRows()...)
	playgroundSchema := func(lang, src string) func(*testing.T, *testServer) string {
		return func(t *testing.T, ts *testServer) string {
			body, _ := json.Marshal(map[string]string{"session": "0123456789abcdef", "language": lang, "schema": src})
			return httpAnswer(t, ts, "/playground/api/analyze", "", strings.NewReader(string(body)))
		}
	}
	rows = append(rows,
		// The playground takes schemas of up to 256 KB.
		hostileRow{"playground", "SpiceDB schema, 100,000 nested parentheses", playgroundSchema("spicedb", hostileZedBase+deepParens(100_000)+"\n}"), "200"},
		hostileRow{"playground", "Permify schema, 100,000 nested parentheses", playgroundSchema("permify", hostilePermBase+deepParens(100_000)+"\n}"), "200"},
		hostileRow{"playground", "Permify schema, an `or` of 25,000 terms", playgroundSchema("permify", hostilePermBase+chain(25_000, "or")+"\n}"), "200"},
		hostileRow{"playground", "a schema over its limit", playgroundSchema("spicedb", hostileZedBase+deepParens(1_000_000)+"\n}"), "400"},
		hostileRow{"playground", "an oversized chunked body", oversized("/playground/api/analyze", true), "413"},
		hostileRow{"playground", "a validation file nested 100,000 deep", func(t *testing.T, ts *testServer) string {
			body, _ := json.Marshal(map[string]string{"session": "0123456789abcdef", "file": "schema: x\nrelationships: " + strings.Repeat("[", 100_000)})
			return httpAnswer(t, ts, "/playground/api/import", "", strings.NewReader(string(body)))
		}, "400"},
	)
	return rows
}

func permifyRows() []hostileRow {
	post := func(path string, body any) func(*testing.T, *testServer) string {
		return func(t *testing.T, ts *testServer) string {
			raw, _ := json.Marshal(body)
			return httpAnswer(t, ts, "/v1/tenants/t1/"+path, testKey, strings.NewReader(string(raw)))
		}
	}
	postRaw := func(path, body string) func(*testing.T, *testServer) string {
		return func(t *testing.T, ts *testServer) string {
			return httpAnswer(t, ts, "/v1/tenants/t1/"+path, testKey, strings.NewReader(body))
		}
	}
	check := func(entityID string, depth int) map[string]any {
		return map[string]any{
			"metadata": map[string]any{"depth": depth},
			"entity":   map[string]any{"type": "document", "id": entityID}, "permission": "view",
			"subject": map[string]any{"type": "user", "id": "alice"},
		}
	}
	lookup := func(pageSize string) string {
		return `{"entity_type":"document","permission":"view","subject":{"type":"user","id":"alice"},"page_size":` + pageSize + `}`
	}
	return []hostileRow{
		{"permify", "1,000,000 nested parentheses", post("schemas/write", map[string]string{"schema": hostilePermBase + deepParens(1_000_000) + "\n}"}), "400 ERROR_CODE_SCHEMA_COMPILE"},
		{"permify", "an `or` of 100,000 terms", post("schemas/write", map[string]string{"schema": hostilePermBase + chain(100_000, "or") + "\n}"}), "200"},
		{"permify", "a `not` chain 200 deep, kept as .zed", post("schemas/write", map[string]string{"schema": hostilePermBase + chain(201, "not") + "\n}"}), "200"},
		{"permify", "a `not` chain of 50,000 terms", post("schemas/write", map[string]string{"schema": hostilePermBase + chain(50_000, "not") + "\n}"}), "400 ERROR_CODE_SCHEMA_COMPILE"},
		{"permify", "a rule body nested 300 deep", post("schemas/write", map[string]string{"schema": "rule r(a boolean) { " + strings.Repeat("(", 300) + "a" + strings.Repeat(")", 300) + " }\n" +
			hostilePermBase + "viewer\n\tattribute a boolean\n\tpermission p = r(a)\n}"}), "400 ERROR_CODE_SCHEMA_COMPILE"},
		{"permify", "a check of a 1 MB entity id", post("permissions/check", check(strings.Repeat("a", 1<<20), 20)), "400 ERROR_CODE_VALIDATION"},
		{"permify", "a check of an entity id in invalid UTF-8", post("permissions/check", check("doc\xff\xfe", 20)), "400 ERROR_CODE_VALIDATION"},
		{"permify", "a check with metadata.depth -1", post("permissions/check", check("1", -1)), "400 ERROR_CODE_VALIDATION"},
		{"permify", "a lookup with page_size -1", postRaw("permissions/lookup-entity", lookup("-1")), "400 ERROR_CODE_VALIDATION"},
		{"permify", "a lookup with page_size 2^63", postRaw("permissions/lookup-entity", lookup("9223372036854775808")), "400 ERROR_CODE_INVALID_ARGUMENT"},
		{"permify", "a lookup with page_size 2^63-1", postRaw("permissions/lookup-entity", lookup("9223372036854775807")), "400 ERROR_CODE_VALIDATION"},
		{"permify", "a lookup with page_size 0 (the default)", postRaw("permissions/lookup-entity", lookup("0")), "200"},
		{"permify", "data/read with a garbage continuous_token", postRaw("data/read", `{"filter":{"entity":{"type":"document"}},"continuous_token":"!!garbage!!"}`), "400 ERROR_CODE_INVALID_CONTINUOUS_TOKEN"},
		{"permify", "relationships/read with a 1 MB filter id", post("data/relationships/read", map[string]any{"filter": map[string]any{"entity": map[string]any{"type": "document", "ids": []string{strings.Repeat("a", 1<<20)}}}}), "400 ERROR_CODE_VALIDATION"},
		{"permify", "JSON nested 100,000 deep", postRaw("permissions/check", `{"context":{"data":`+strings.Repeat("[", 100_000)+`}}`), "400 ERROR_CODE_INVALID_ARGUMENT"},
		{"permify", "an oversized chunked body", oversized("/v1/tenants/t1/permissions/check", true), "413"},
		{"permify", "an oversized sized body", oversized("/v1/tenants/t1/permissions/check", false), "413"},
	}
}

// writeSchemaPastDeadline compiles for a write in-process with a context that has
// ended, as a handler finds it when its client's deadline passes mid-compile: the
// compile gives up (a compile that ran on would return the schema).
func writeSchemaPastDeadline(t *testing.T, ts *testServer) string {
	ctx, cancel := context.WithDeadline(ctxT(t), time.Now())
	defer cancel()
	_, _, err := ts.srv.compileForWrite(ctx, hostileZedBase+chain(300_000, "+")+"\n}")
	return status.Code(ts.srv.status(err)).String()
}

// checkLongChain checks a permission whose rewrite is an exclusion chain as deep as
// the compiler allows.
func checkLongChain(t *testing.T, ts *testServer) string {
	ts.writeSchema(t, hostileZedBase+chain(201, "-")+"\n}")
	_, err := ts.check(t, fullyConsistent(), obj("document", "1"), "view", sub("user", "alice", ""))
	return status.Code(err).String()
}

// checkDeepContext sends a check whose caveat context nests lists past protobuf's
// recursion limit (10,000).
func checkDeepContext(t *testing.T, ts *testServer) string {
	v := structpb.NewStringValue("x")
	for range 20_000 {
		v = structpb.NewListValue(&structpb.ListValue{Values: []*structpb.Value{v}})
	}
	_, err := ts.perms.CheckPermission(ctxT(t), &v1.CheckPermissionRequest{
		Consistency: fullyConsistent(), Resource: obj("document", "1"), Permission: "view", Subject: sub("user", "alice", ""),
		Context: &structpb.Struct{Fields: map[string]*structpb.Value{"deep": v}},
	})
	return status.Code(err).String()
}

// oversized sends a body one byte past the limit, chunked (no length) or sized.
func oversized(path string, chunked bool) func(*testing.T, *testServer) string {
	return func(t *testing.T, ts *testServer) string {
		body := `{"schema":"` + strings.Repeat("a", DefaultMaxRequestBytes) + `"}`
		var r io.Reader = strings.NewReader(body)
		if chunked {
			r = io.MultiReader(r) // hides the length: the client sends it chunked
		}
		return httpAnswer(t, ts, path, testKey, r)
	}
}

// httpAnswer posts body and returns "<status> <Permify reason, if any> <body>".
func httpAnswer(t *testing.T, ts *testServer, path, key string, body io.Reader) string {
	t.Helper()
	code, raw := ts.postReader(t, path, key, body)
	var out struct {
		Message string `json:"message"`
	}
	answer := strconv.Itoa(code)
	if json.Unmarshal(raw, &out) == nil && strings.HasPrefix(out.Message, "ERROR_CODE_") {
		answer += " " + out.Message
	}
	return answer + " " + string(raw)
}

// corpusRows sends every schema of the schema fuzz corpora to each listener that
// takes schemas: whatever the answer, it is one of the documented ones.
func corpusRows(t *testing.T) []hostileRow {
	var rows []hostileRow
	for _, c := range []struct{ dir, lang string }{
		{"../schema/testdata/fuzz/FuzzCompile", "spicedb"},
		{"../schema/perm/testdata/fuzz/FuzzCompile", "permify"},
	} {
		files, _ := filepath.Glob(filepath.Join(c.dir, "*"))
		for _, f := range files {
			src, ok := corpusString(t, f)
			if !ok {
				continue
			}
			name := c.lang + " corpus " + filepath.Base(f)
			if c.lang == "spicedb" {
				// A gRPC client will not marshal invalid UTF-8; the gateway's JSON takes it.
				if utf8.ValidString(src) {
					rows = append(rows, hostileRow{"grpc", name, func(t *testing.T, ts *testServer) string {
						_, err := ts.schema.WriteSchema(ctxT(t), &v1.WriteSchemaRequest{Schema: src})
						return documented(status.Code(err) == codes.OK || status.Code(err) == codes.InvalidArgument || status.Code(err) == codes.FailedPrecondition, status.Code(err).String())
					}, "documented"})
				}
				rows = append(rows, hostileRow{"gateway", name, func(t *testing.T, ts *testServer) string {
					raw, _ := json.Marshal(map[string]string{"schema": src})
					got := httpAnswer(t, ts, "/v1/schema/write", testKey, strings.NewReader(string(raw)))
					return documented(strings.HasPrefix(got, "200 ") || strings.HasPrefix(got, "400 "), got)
				}, "documented"})
			} else {
				rows = append(rows, hostileRow{"permify", name, func(t *testing.T, ts *testServer) string {
					raw, _ := json.Marshal(map[string]string{"schema": src})
					got := httpAnswer(t, ts, "/v1/tenants/t1/schemas/write", testKey, strings.NewReader(string(raw)))
					return documented(strings.HasPrefix(got, "200 ") || strings.HasPrefix(got, "400 "), got)
				}, "documented"})
			}
			rows = append(rows, hostileRow{"playground", name, func(t *testing.T, ts *testServer) string {
				raw, _ := json.Marshal(map[string]string{"session": "0123456789abcdef", "language": c.lang, "schema": src})
				got := httpAnswer(t, ts, "/playground/api/analyze", "", strings.NewReader(string(raw)))
				return documented(strings.HasPrefix(got, "200 "), got)
			}, "documented"})
		}
	}
	return rows
}

func documented(ok bool, got string) string {
	if ok {
		return "documented"
	}
	return "undocumented answer " + got
}

// corpusString reads a one-string fuzz corpus file ("go test fuzz v1" then string(...)).
func corpusString(t *testing.T, path string) (string, bool) {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 8<<20)
	var values []string
	for sc.Scan() {
		if line := sc.Text(); strings.HasPrefix(line, "string(") {
			v, err := strconv.Unquote(strings.TrimSuffix(strings.TrimPrefix(line, "string("), ")"))
			if err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			values = append(values, v)
		} else if line != "go test fuzz v1" {
			return "", false
		}
	}
	if len(values) != 1 {
		return "", false
	}
	return values[0], true
}

// TestSchemaCompilesAreExpensive: calls that compile a client's schema take the
// expensive class's slots, so a flood of them cannot take the checks' slots.
func TestSchemaCompilesAreExpensive(t *testing.T) {
	a := newAdmission(Config{MaxInflightCheap: 1, MaxInflightExpensive: 1}, newMetrics(slog.Default()))
	for _, m := range []string{"/authzed.api.v1.SchemaService/WriteSchema", "/authzed.api.v1.SchemaService/DiffSchema"} {
		if a.limiterFor(m) != a.expensive {
			t.Errorf("%s is not in the expensive class", m)
		}
	}
	if a.limiterFor("/authzed.api.v1.SchemaService/ReadSchema") != a.cheap {
		t.Error("ReadSchema left the cheap class")
	}
}
