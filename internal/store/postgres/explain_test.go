package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/store"
	"github.com/latch-authz/latch/internal/store/postgres/pgtest"
)

// explainFixture yields n documents with a viewer and an owner each, spread over 2,000
// users, so that one resource or one subject matches a small fraction of the table.
func explainFixture(n int) iter.Seq2[rel.Relationship, error] {
	return func(yield func(rel.Relationship, error) bool) {
		for i := range n {
			for _, r := range []struct {
				relation string
				user     int
			}{{"viewer", i % 2000}, {"owner", (i * 7) % 2000}} {
				x := rel.Relationship{
					Resource: rel.ObjectRef{Type: "doc", ID: fmt.Sprint("d", i)}, Relation: r.relation,
					Subject: rel.SubjectRef{Object: rel.ObjectRef{Type: "user", ID: fmt.Sprint("u", r.user)}},
				}
				if !yield(x, nil) {
					return
				}
			}
		}
	}
}

func ids(prefix string, n, step int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprint(prefix, i*step)
	}
	return out
}

// TestHotQueriesUseIndexes loads 120,000 relationships and checks that the forward
// query (resource type, ids, relation) and the reverse query (subject type, ids,
// relation) use the forward and subject indexes, with PostgreSQL's custom plans and
// with the generic plans prepared statements switch to.
func TestHotQueriesUseIndexes(t *testing.T) {
	srv := pgtest.Get(t)
	uri := srv.NewDatabase(t, "latch_migrated", Migrate)
	ctx := context.Background()
	s, err := Open(ctx, uri, Options{GCInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rev, err := s.BulkLoad(ctx, explainFixture(60_000))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.writes.Exec(ctx, "ANALYZE latch_relationships"); err != nil {
		t.Fatal(err)
	}
	snap, err := s.snapshotAt(ctx, s.reads, rev)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		f     store.Filter
		index string // "": either index
	}{
		{"forward", store.Filter{ResourceType: "doc", ResourceIDs: ids("d", 50, 997), Relation: "viewer"}, "latch_relationships_pk"},
		{"forward check", store.Filter{
			ResourceType: "doc", ResourceIDs: ids("d", 50, 997), Relation: "viewer",
			Subject: &store.SubjectFilter{Type: "user", IDs: ids("u", 3, 1), RelationSet: true},
		}, ""},
		{"reverse", store.Filter{
			ResourceType: "doc", Relation: "viewer",
			Subject: &store.SubjectFilter{Type: "user", IDs: ids("u", 50, 37), RelationSet: true},
		}, "latch_relationships_by_subject"},
		{"reverse any relation", store.Filter{Subject: &store.SubjectFilter{Type: "user", IDs: ids("u", 50, 37)}}, "latch_relationships_by_subject"},
		{"reverse any type", store.Filter{Subject: &store.SubjectFilter{IDs: ids("u", 50, 37)}}, "latch_relationships_by_subject"},
		// A check's read of nested subject sets: the primary key's prefix holds the
		// subject type, so only the sets are read, not the resources' users.
		{"subject sets", store.Filter{
			ResourceType: "doc", ResourceIDs: ids("d", 50, 997), Relation: "viewer",
			Subject: &store.SubjectFilter{Type: "group", Relation: "member", RelationSet: true},
		}, "latch_relationships_pk"},
	}
	conn, err := s.reads.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	for _, c := range cases {
		sql, args := selectPage(c.f, snap, time.Now(), nil, 1000)
		var plan string
		if err := conn.QueryRow(ctx, "EXPLAIN (FORMAT JSON) "+sql, args...).Scan(&plan); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		generic := genericPlan(t, conn.Conn(), sql, args)
		checkPlan(t, c.name+" (custom plan)", plan, c.index)
		checkPlan(t, c.name+" (generic plan)", generic, c.index)
		if c.f.Subject != nil && c.f.Subject.Type != "" && c.index == "latch_relationships_pk" {
			for _, p := range []string{plan, generic} {
				if !strings.Contains(indexConds(p), "subject_type") {
					t.Errorf("%s: the index condition does not narrow the subject type:\n%s", c.name, p)
				}
			}
		}
	}
}

// genericPlan explains sql as a prepared statement forced to a generic plan, the plan
// a statement gets once PostgreSQL stops planning it per execution.
func genericPlan(t *testing.T, conn *pgx.Conn, sql string, args []any) string {
	t.Helper()
	ctx := context.Background()
	lits := make([]string, len(args))
	for i, a := range args {
		lits[i] = literal(a)
	}
	for _, stmt := range []string{"SET plan_cache_mode = force_generic_plan", "DEALLOCATE ALL", "PREPARE explained AS " + sql} {
		if _, err := conn.Exec(ctx, stmt, pgx.QueryExecModeSimpleProtocol); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	defer conn.Exec(ctx, "RESET plan_cache_mode", pgx.QueryExecModeSimpleProtocol) //nolint:errcheck
	var plan string
	q := "EXPLAIN (FORMAT JSON) EXECUTE explained(" + strings.Join(lits, ", ") + ")"
	if err := conn.QueryRow(ctx, q, pgx.QueryExecModeSimpleProtocol).Scan(&plan); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	return plan
}

func literal(v any) string {
	quote := func(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
	switch v := v.(type) {
	case string:
		return quote(v)
	case []string:
		q := make([]string, len(v))
		for i, s := range v {
			q[i] = quote(s)
		}
		return "ARRAY[" + strings.Join(q, ",") + "]::text[]"
	case time.Time:
		return quote(v.Format(time.RFC3339Nano))
	case int64:
		return strconv.FormatInt(v, 10)
	}
	panic(fmt.Sprintf("no literal for %T", v))
}

// indexConds returns the index conditions of every node of a JSON plan, joined.
func indexConds(planJSON string) string {
	var plans []struct{ Plan map[string]any }
	if json.Unmarshal([]byte(planJSON), &plans) != nil || len(plans) != 1 {
		return ""
	}
	var out []string
	var walk func(n map[string]any)
	walk = func(n map[string]any) {
		if c, ok := n["Index Cond"].(string); ok {
			out = append(out, c)
		}
		children, _ := n["Plans"].([]any)
		for _, c := range children {
			if m, ok := c.(map[string]any); ok {
				walk(m)
			}
		}
	}
	walk(plans[0].Plan)
	return strings.Join(out, " ")
}

// checkPlan fails unless the plan reads latch_relationships through index and never
// scans it sequentially.
func checkPlan(t *testing.T, name, planJSON, index string) {
	t.Helper()
	var plans []struct{ Plan map[string]any }
	if err := json.Unmarshal([]byte(planJSON), &plans); err != nil || len(plans) != 1 {
		t.Fatalf("%s: unreadable plan %s: %v", name, planJSON, err)
	}
	used := false
	var walk func(n map[string]any)
	walk = func(n map[string]any) {
		typ, _ := n["Node Type"].(string)
		if typ == "Seq Scan" && n["Relation Name"] == "latch_relationships" {
			t.Errorf("%s scans latch_relationships sequentially:\n%s", name, planJSON)
		}
		idx, _ := n["Index Name"].(string)
		if strings.Contains(typ, "Index") && (idx == index || index == "" && strings.HasPrefix(idx, "latch_relationships_")) {
			used = true
		}
		children, _ := n["Plans"].([]any)
		for _, c := range children {
			if m, ok := c.(map[string]any); ok {
				walk(m)
			}
		}
	}
	walk(plans[0].Plan)
	if !used {
		t.Errorf("%s does not use index %q:\n%s", name, index, planJSON)
	}
}
