package server

import (
	"fmt"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/latch-authz/latch/internal/store/postgres"
	"github.com/latch-authz/latch/internal/store/postgres/pgtest"
)

// The attributes the concurrency test writes, one writer each, and the value each
// writer ends on. The rule reads them all, so a rule call whose arguments were
// completed from a stale read of another writer's attribute shows in the check.
var (
	concurrentAttrs = []string{"width", "height", "depth", "weight"}
	lastValue       = 25
)

func concurrentAttrsSchema() string {
	var params, conds []string
	for _, a := range concurrentAttrs {
		params = append(params, a+" integer")
		conds = append(conds, fmt.Sprintf("%s == %d", a, lastValue))
	}
	return "entity user {}\n" +
		"entity doc {\n" +
		"  attribute " + strings.Join(concurrentAttrs, " integer\n  attribute ") + " integer\n" +
		"  permission done = all_last(" + strings.Join(concurrentAttrs, ", ") + ")\n" +
		"}\n" +
		"rule all_last(" + strings.Join(params, ", ") + ") { " + strings.Join(conds, " && ") + " }\n"
}

// TestPermifyConcurrentAttributeWritesLoseNoUpdate: writers of different attributes
// of the same entities, all at once through the API, each counting its attribute up
// to lastValue. Afterwards every attribute reads back at its last value and the rule
// over all of them (a relationship built from every attribute of the entity) holds:
// no write's value was overwritten by a concurrent write of another attribute.
func TestPermifyConcurrentAttributeWritesLoseNoUpdate(t *testing.T) {
	for _, tc := range []struct {
		name   string
		config func(t *testing.T) func(*Config)
	}{
		{"memory", func(*testing.T) func(*Config) { return nil }},
		{"pebble", func(t *testing.T) func(*Config) {
			dir := filepath.Join(t.TempDir(), "data")
			return func(c *Config) { c.DatastoreEngine, c.DatastoreURI = "pebble", dir }
		}},
		{"postgres", func(t *testing.T) func(*Config) {
			uri := pgtest.Get(t).NewDatabase(t, "latch_migrated", postgres.Migrate)
			return func(c *Config) { c.DatastoreEngine, c.DatastoreURI = "postgres", uri }
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mutate := tc.config(t)
			ts := start(t, func(c *Config) {
				if mutate != nil {
					mutate(c)
				}
				// Every writer's call waits for its turn: this is about lost updates, and
				// Permify's calls are admitted like the SpiceDB API's.
				c.AdmissionWait = time.Minute
			})
			if code, out := permifyPost(t, ts, testKey, "/v1/tenants/t1/schemas/write", map[string]any{"schema": concurrentAttrsSchema()}); code != http.StatusOK {
				t.Fatalf("schemas/write: %d %v", code, out)
			}
			const docs = 4
			writeAttributesConcurrently(t, ts, docs)
			for d := range docs {
				checkLastValues(t, ts, strconv.Itoa(d))
			}
		})
	}
}

// writeAttributesConcurrently runs one writer per attribute of each of docs
// entities, each writing its attribute 1, 2, ... lastValue, one write per value.
func writeAttributesConcurrently(t *testing.T, ts *testServer, docs int) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan string, docs*len(concurrentAttrs))
	for d := range docs {
		for _, a := range concurrentAttrs {
			wg.Go(func() {
				for v := 1; v <= lastValue; v++ {
					body := map[string]any{"attributes": []any{map[string]any{
						"entity": map[string]any{"type": "doc", "id": strconv.Itoa(d)}, "attribute": a,
						"value": map[string]any{"@type": "type.googleapis.com/base.v1.IntegerValue", "data": v},
					}}}
					if code, out := permifyPost(t, ts, testKey, "/v1/tenants/t1/data/write", body); code != http.StatusOK {
						errs <- fmt.Sprintf("doc:%d %s=%d: %d %v", d, a, v, code, out)
						return
					}
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error("data/write:", e)
	}
	if t.Failed() {
		t.FailNow()
	}
}

// checkLastValues reads doc's attributes back and checks the rule over all of them.
func checkLastValues(t *testing.T, ts *testServer, doc string) {
	t.Helper()
	code, out := permifyPost(t, ts, testKey, "/v1/tenants/t1/data/attributes/read", map[string]any{
		"filter": map[string]any{"entity": map[string]any{"type": "doc", "ids": []string{doc}}},
	})
	if code != http.StatusOK {
		t.Fatalf("attributes/read: %d %v", code, out)
	}
	got := map[string]any{}
	for _, it := range out["attributes"].([]any) {
		a := it.(map[string]any)
		got[a["attribute"].(string)] = a["value"].(map[string]any)["data"]
	}
	for _, a := range concurrentAttrs {
		if got[a] != float64(lastValue) {
			t.Errorf("doc:%s %s = %v, want %d", doc, a, got[a], lastValue)
		}
	}
	code, out = permifyPost(t, ts, testKey, "/v1/tenants/t1/permissions/check", map[string]any{
		"metadata": map[string]any{"depth": 20},
		"entity":   map[string]any{"type": "doc", "id": doc}, "permission": "done", "subject": map[string]any{"type": "user", "id": "u"},
	})
	if code != http.StatusOK || out["can"] != "CHECK_RESULT_ALLOWED" {
		t.Errorf("doc:%s done (a rule over every attribute at its last value): %d %v; an attribute write was lost from the rule's arguments", doc, code, out)
	}
}
