package fga

import (
	"testing"

	openfgav1 "github.com/openfga/api/proto/openfga/v1"
	"google.golang.org/protobuf/encoding/protojson"
)

var fuzzSeeds = []string{
	docModel,
	"model\n  schema 1.1\ntype user\ntype doc\n  relations\n    define a: [user] but not b\n    define b: a and [user]\n",
	"model\n  schema 1.1\ntype user\ntype folder\n  relations\n    define parent: [folder]\n    define viewer: [user, user:*] or viewer from parent\n",
	"model\n  schema 1.1\ntype user\ntype doc\n  relations\n    define viewer: [user with c]\ncondition c(x: map<list<int>>, t: timestamp, d: duration) {\n  t < timestamp(\"2024-01-01T00:00:00Z\") + d\n}\n",
	"module core\ntype user\n",
}

// FuzzCompileDSL: no model text makes parsing or compiling panic, and a model that
// compiles has a schema.
func FuzzCompileDSL(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		m, probs := CompileDSL(src)
		if len(probs) == 0 && (m == nil || m.Schema == nil) {
			t.Fatalf("no problems and no model for %q", src)
		}
		for _, p := range probs {
			if p.Line < 1 || p.Col < 1 {
				t.Fatalf("problem without a position: %v", p)
			}
		}
	})
}

// FuzzCompileJSON: no JSON model (WriteAuthorizationModel's input) makes compiling
// panic.
func FuzzCompileJSON(f *testing.F) {
	for _, s := range fuzzSeeds {
		if pm, probs := ParseDSL(s); len(probs) == 0 {
			b, err := protojson.Marshal(pm)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(b)
		}
	}
	f.Add([]byte(`{"schema_version":"1.1","type_definitions":[{"type":"doc","relations":{"a":{"tupleToUserset":{}},"b":{"difference":{}},"c":{"union":{"child":[{}]}}}}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var pm openfgav1.AuthorizationModel
		if protojson.Unmarshal(data, &pm) != nil {
			return
		}
		if m, probs := Compile(&pm); len(probs) == 0 && m == nil {
			t.Fatal("no problems and no model")
		}
	})
}
