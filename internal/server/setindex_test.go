package server

import (
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "github.com/authzed/authzed-go/proto/authzed/api/v1"

	"github.com/latch-authz/latch/internal/store/postgres"
	"github.com/latch-authz/latch/internal/store/postgres/pgtest"
)

const nestedGroupsSchema = `definition user {}

definition group {
	relation member: user | group#member
}

definition document {
	relation viewer: group#member
	permission view = viewer
}
`

// TestIndexFollowsWrites moves a user in and out of the deepest of a chain of nested
// groups, checking at once after each write with fully_consistent (which the index
// answers only once it has applied the write, else evaluation does) and with the
// write's token, on each store: every answer is the write's. Then, the index caught
// up, checks at a later revision are answered by it. (A
// fully_consistent read on PostgreSQL reads a head that other databases' commits move
// on, which the polled index reaches a poll later: those are evaluated.)
func TestIndexFollowsWrites(t *testing.T) {
	stores := []struct {
		name   string
		config func(t *testing.T, c *Config)
	}{
		{"memory", func(*testing.T, *Config) {}},
		{"pebble", func(t *testing.T, c *Config) { c.DatastoreEngine, c.DatastoreURI = "pebble", t.TempDir() }},
		{"postgres", func(t *testing.T, c *Config) {
			c.DatastoreEngine = "postgres"
			c.DatastoreURI = pgtest.Get(t).NewDatabase(t, "latch_migrated", postgres.Migrate)
		}},
	}
	for _, sc := range stores {
		t.Run(sc.name, func(t *testing.T) {
			ts := start(t, func(c *Config) { sc.config(t, c) })
			ts.writeSchema(t, nestedGroupsSchema)
			const depth = 8
			var chain []*v1.Relationship
			for i := range depth - 1 {
				chain = append(chain, relationship("group", fmt.Sprint("g", i), "member", "group", fmt.Sprint("g", i+1), "member"))
			}
			chain = append(chain, relationship("document", "d", "viewer", "group", "g0", "member"))
			ts.write(t, chain...)
			deep := relationship("group", fmt.Sprint("g", depth-1), "member", "user", "u", "")
			checkAll := func(want bool, groups []string, cs ...*v1.Consistency) {
				t.Helper()
				for _, c := range cs {
					queries := []struct{ res *v1.ObjectReference }{{obj("document", "d")}}
					for _, g := range groups {
						queries = append(queries, struct{ res *v1.ObjectReference }{obj("group", g)})
					}
					for _, q := range queries {
						perm := "member"
						if q.res.GetObjectType() == "document" {
							perm = "view"
						}
						resp, err := ts.check(t, c, q.res, perm, sub("user", "u", ""))
						if err != nil {
							t.Fatal(err)
						}
						if got := resp.GetPermissionship() == v1.CheckPermissionResponse_PERMISSIONSHIP_HAS_PERMISSION; got != want {
							t.Fatalf("%v %s after the write: got %v, want %v", q.res, perm, got, want)
						}
					}
				}
			}
			var token *v1.ZedToken
			for i := range 20 {
				op := v1.RelationshipUpdate_OPERATION_TOUCH
				if i%2 == 1 {
					op = v1.RelationshipUpdate_OPERATION_DELETE
				}
				resp, err := ts.perms.WriteRelationships(ctxT(t), &v1.WriteRelationshipsRequest{Updates: []*v1.RelationshipUpdate{update(op, deep)}})
				if err != nil {
					t.Fatal(err)
				}
				token = resp.GetWrittenAt()
				checkAll(i%2 == 0, []string{"g0", "g3"}, fullyConsistent(), &v1.Consistency{Requirement: &v1.Consistency_AtLeastAsFresh{AtLeastAsFresh: token}})
			}
			// A revision no check has read: the dispatch cache holds the answers of
			// the others.
			token = ts.write(t, relationship("document", "other", "viewer", "group", "g0", "member"))
			awaitIndex(t, ts)
			before := ts.srv.index.Stats().Answers
			checkAll(false, []string{"g1", "g5"}, &v1.Consistency{Requirement: &v1.Consistency_AtExactSnapshot{AtExactSnapshot: token}})
			if after := ts.srv.index.Stats().Answers; after == before {
				t.Fatalf("the index answered none of the checks once it had caught up (%d answers)", after)
			}
		})
	}
}

// TestPermifyDefaultTenantUsesIndex: Permify's tenant t1 is the server's store, so its
// checks through nested groups are answered by the server's index, as the SpiceDB
// API's are, with the same answers.
func TestPermifyDefaultTenantUsesIndex(t *testing.T) {
	ts := start(t, nil)
	ts.writeSchema(t, nestedGroupsSchema)
	const depth = 8
	var chain []*v1.Relationship
	for i := range depth - 1 {
		chain = append(chain, relationship("group", fmt.Sprint("g", i), "member", "group", fmt.Sprint("g", i+1), "member"))
	}
	chain = append(chain, relationship("document", "d", "viewer", "group", "g0", "member"), relationship("group", fmt.Sprint("g", depth-1), "member", "user", "u", ""))
	ts.write(t, chain...)
	awaitIndex(t, ts)
	before := ts.srv.index.Stats().Answers
	for _, c := range []struct{ user, want string }{{"u", "CHECK_RESULT_ALLOWED"}, {"other", "CHECK_RESULT_DENIED"}} {
		code, out := permifyPost(t, ts, testKey, "/v1/tenants/t1/permissions/check", map[string]any{
			"metadata": map[string]any{"depth": 20},
			"entity":   map[string]any{"type": "document", "id": "d"}, "permission": "view", "subject": map[string]any{"type": "user", "id": c.user},
		})
		if code != http.StatusOK || out["can"] != c.want {
			t.Fatalf("check for %s: %d %v, want %s", c.user, code, out, c.want)
		}
	}
	if after := ts.srv.index.Stats().Answers; after == before {
		t.Fatalf("the index answered none of t1's checks (%d answers)", after)
	}
}

// awaitIndex waits, at most a minute, for the server's index to have applied the
// store's head.
func awaitIndex(t *testing.T, ts *testServer) {
	t.Helper()
	head, err := ts.srv.store.HeadRevision(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for st := ts.srv.index.Stats(); !st.Ready || st.Applied < head; st = ts.srv.index.Stats() {
		if time.Now().After(deadline) {
			t.Fatalf("the index did not apply revision %d: %+v", head, st)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestTenantIndexesShareTheBudget: a Permify tenant's index draws on the server's
// index budget (--materialize-max-bytes) and has metrics of its own, and the tenant's
// deletion gives back what it held and takes its metrics away.
func TestTenantIndexesShareTheBudget(t *testing.T) {
	ts := start(t, func(c *Config) { c.MetricsAddr = "127.0.0.1:0" })
	awaitIndex(t, ts)
	own := ts.srv.index.Stats().Bytes
	if used := ts.srv.indexBudget.Used(); used != own {
		t.Fatalf("budget: %d used, the server's index holds %d", used, own)
	}
	if code, out := permifyPost(t, ts, testKey, "/v1/tenants/create", map[string]any{"id": "acme", "name": "acme"}); code != http.StatusOK {
		t.Fatalf("create: %d %v", code, out)
	}
	const nested = "entity user {}\nentity group { relation member @user @group#member }"
	if code, out := permifyPost(t, ts, testKey, "/v1/tenants/acme/schemas/write", map[string]any{"schema": nested}); code != http.StatusOK {
		t.Fatalf("schemas/write: %d %v", code, out)
	}
	member := func(group string, subject map[string]any) map[string]any {
		return map[string]any{"entity": map[string]any{"type": "group", "id": group}, "relation": "member", "subject": subject}
	}
	var tuples []any
	for i := range 50 {
		tuples = append(tuples, member(fmt.Sprint("g", i/2), map[string]any{"type": "group", "id": fmt.Sprint("g", i+1), "relation": "member"}),
			member(fmt.Sprint("g", i), map[string]any{"type": "user", "id": fmt.Sprint("u", i)}))
	}
	if code, out := permifyPost(t, ts, testKey, "/v1/tenants/acme/data/write", map[string]any{"tuples": tuples}); code != http.StatusOK {
		t.Fatalf("data/write: %d %v", code, out)
	}
	// The tenant's index builds and follows its store in the background.
	deadline := time.Now().Add(time.Minute)
	for ts.srv.indexBudget.Used() <= own+int64(len(tuples))*4 {
		if time.Now().After(deadline) {
			t.Fatalf("budget: %d used, the server's index holds %d: the tenant's index is not in it", ts.srv.indexBudget.Used(), own)
		}
		time.Sleep(5 * time.Millisecond)
	}
	// The tenant's index may still be applying the write: scrape until the budget
	// held still across the scrape.
	var metrics string
	var used int64
	for used = -1; used != ts.srv.indexBudget.Used(); {
		if time.Now().After(deadline) {
			t.Fatal("the indexes' memory did not settle")
		}
		used = ts.srv.indexBudget.Used()
		metrics = scrape(t, ts.srv.MetricsAddr())
	}
	if shown := metricValue(metrics, "latch_materialize_budget_used_bytes"); shown != float64(used) {
		t.Errorf("latch_materialize_budget_used_bytes %v, %d used", shown, used)
	}
	if shown := metricValue(metrics, `latch_materialize_tenant_bytes{tenant="acme"}`); shown != float64(used-own) {
		t.Errorf(`latch_materialize_tenant_bytes{tenant="acme"} %v, the tenant's index holds %d`, shown, used-own)
	}
	deleteTenant(t, ts, "acme")
	if used := ts.srv.indexBudget.Used(); used != own {
		t.Fatalf("tenant deleted: %d used, the server's index holds %d", used, own)
	}
	if strings.Contains(scrape(t, ts.srv.MetricsAddr()), `tenant="acme"`) {
		t.Error("the deleted tenant's index is still in the metrics")
	}
}

// metricValue is the value of the sample named name (with its labels) in a scrape,
// NaN when there is none.
func metricValue(scraped, name string) float64 {
	for line := range strings.Lines(scraped) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err == nil {
				return f
			}
		}
	}
	return math.NaN()
}
