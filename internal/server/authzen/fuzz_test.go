package authzen

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"

	"github.com/latch-authz/latch/internal/engine"
	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/schema"
	"github.com/latch-authz/latch/internal/server/apierr"
	"github.com/latch-authz/latch/internal/store"
	"github.com/latch-authz/latch/internal/store/memory"
)

// fuzzHandler serves a small schema and data set on a memory store.
func fuzzHandler(t testing.TB) *Handler {
	t.Helper()
	sch, err := schema.Compile(`definition user {}
caveat weekday(day string) { day != "sunday" }
definition doc {
	relation viewer: user | user:* | user with weekday
	permission view = viewer
}`)
	if err != nil {
		t.Fatal(err)
	}
	st := memory.New(memory.Options{})
	var ups []store.Update
	for _, s := range []string{"doc:1#viewer@user:ann", "doc:2#viewer@user:*", "doc:3#viewer@user:bob[weekday]"} {
		r, err := rel.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		ups = append(ups, store.Update{Op: store.Touch, Relationship: r})
	}
	rev, err := st.Write(context.Background(), nil, ups, nil)
	if err != nil {
		t.Fatal(err)
	}
	r, err := st.Reader(context.Background(), rev)
	if err != nil {
		t.Fatal(err)
	}
	eng := engine.New(engine.Config{})
	return New(Config{
		Main: func(context.Context) (Data, error) { return Data{Engine: eng, Reader: r, Schema: sch}, nil },
		Status: func(err error) (int, string) {
			// A domain error the error table classifies is the request's (an unknown
			// type or action, a caveat that cannot be evaluated); any other is a bug.
			if c, ok := apierr.Classify(err, nil); ok && runtime.HTTPStatusFromCode(c.Code) < 500 {
				return http.StatusBadRequest, c.Message
			}
			return http.StatusInternalServerError, err.Error()
		},
		MaxEvaluations: 10,
	})
}

// FuzzRequests: whatever the body, every endpoint answers 200 or 400 and never
// panics: on this data every error is the request's fault, and a 500 a bug.
func FuzzRequests(f *testing.F) {
	for _, seed := range []string{
		`{"subject":{"type":"user","id":"ann"},"action":{"name":"view"},"resource":{"type":"doc","id":"1"}}`,
		`{"subject":{"type":"user","id":"bob"},"action":{"name":"view"},"resource":{"type":"doc","id":"3"},"context":{"day":"monday"}}`,
		`{"subject":{"type":"user"},"action":{"name":"view"},"resource":{"type":"doc","id":"2"},"page":{"limit":1,"token":"AAAAAAAAAAB4"}}`,
		`{"subject":{"type":"user","id":"ann"},"evaluations":[{"action":{"name":"view"},"resource":{"type":"doc","id":"1"}}],"options":{"evaluations_semantic":"deny_on_first_deny"}}`,
		`{"subject":{"type":"user","id":"a#b","properties":{"relation":7}},"resource":{"type":"doc"}}`,
		`[]`, `null`, ``, `{"page":{"limit":-1}}`,
	} {
		f.Add(seed)
	}
	h := fuzzHandler(f)
	paths := []string{"evaluation", "evaluations", "search/subject", "search/resource", "search/action"}
	f.Fuzz(func(t *testing.T, body string) {
		for _, p := range paths {
			w := httptest.NewRecorder()
			h.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/access/v1/"+p, bytes.NewReader([]byte(body))))
			if w.Code != http.StatusOK && w.Code != http.StatusBadRequest {
				t.Fatalf("%s %q: %d %s", p, body, w.Code, w.Body)
			}
		}
	})
}
