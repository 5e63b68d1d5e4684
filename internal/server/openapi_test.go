package server

import (
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"

	authzedproto "github.com/authzed/authzed-go/proto"
)

// swaggerDoc is the part of a Swagger 2.0 document the test compares.
type swaggerDoc struct {
	Swagger     string                                 `json:"swagger"`
	Paths       map[string]map[string]swaggerOperation `json:"paths"`
	Definitions map[string]struct {
		Properties map[string]json.RawMessage `json:"properties"`
		Enum       []string                   `json:"enum"`
	} `json:"definitions"`
}

type swaggerOperation struct {
	OperationID string `json:"operationId"`
}

// /openapi.json serves, without a key, a document generated from the services the
// gateway serves (issue 30, item 6). It is held against the document authzed-go
// generated from the same protos with protoc-gen-openapiv2 (in the test only, as the
// reference): the same paths, verbs and operation ids; the same definitions for the
// messages those reach, with the same properties and enum values; and every $ref in
// it resolves.
func TestOpenAPIDocument(t *testing.T) {
	ts := start(t, nil)
	resp, err := http.Get("http://" + ts.httpAddr + "/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("GET /openapi.json: %d %s, %v", resp.StatusCode, resp.Header.Get("Content-Type"), err)
	}
	var got, want swaggerDoc
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(authzedproto.OpenAPISchema), &want); err != nil {
		t.Fatal(err)
	}
	if got.Swagger != "2.0" {
		t.Errorf("swagger = %q", got.Swagger)
	}
	if g, w := slices.Sorted(maps.Keys(got.Paths)), slices.Sorted(maps.Keys(want.Paths)); !slices.Equal(g, w) {
		t.Fatalf("paths\n got  %v\n want %v", g, w)
	}
	for path, ops := range want.Paths {
		for verb, op := range ops {
			if got.Paths[path][verb].OperationID != op.OperationID {
				t.Errorf("%s %s: operation %q, want %q", verb, path, got.Paths[path][verb].OperationID, op.OperationID)
			}
		}
	}
	compared := 0
	for name, def := range got.Definitions {
		ref, ok := want.Definitions[name]
		if !ok || strings.HasPrefix(name, "Stream result of") {
			continue
		}
		compared++
		if g, w := slices.Sorted(maps.Keys(def.Properties)), slices.Sorted(maps.Keys(ref.Properties)); !slices.Equal(g, w) {
			t.Errorf("definition %s: properties %v, want %v", name, g, w)
		}
		if !slices.Equal(def.Enum, ref.Enum) {
			t.Errorf("definition %s: enum %v, want %v", name, def.Enum, ref.Enum)
		}
	}
	t.Logf("%d bytes, %d paths, %d definitions (%d named as in the reference)", len(body), len(got.Paths), len(got.Definitions), compared)
	if compared < 60 {
		t.Errorf("only %d definitions are named as in the reference", compared)
	}
	for _, m := range strings.Split(string(body), `"$ref": "#/definitions/`)[1:] {
		name := m[:strings.IndexByte(m, '"')]
		if _, ok := got.Definitions[name]; !ok {
			t.Errorf("$ref to %q, which is not defined", name)
		}
	}
}
