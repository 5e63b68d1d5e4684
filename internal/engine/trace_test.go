package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/latch-authz/latch/internal/engine"
	"github.com/latch-authz/latch/internal/engine/cache"
	"github.com/latch-authz/latch/internal/rel"
)

const traceSchema = `caveat ipok(ip string, allowed string) {
	ip == allowed
}
definition user {}
definition group {
	relation member: user | group#member
}
definition folder {
	relation viewer: user | group#member
	relation parent: folder
	permission view = viewer + parent->view
}
definition doc {
	relation owner: user
	relation reader: user | user:* | group#member | user with ipok
	relation banned: user
	relation folder: folder
	permission read = (reader + owner + folder->view) - banned
	permission edit = owner & reader
	permission twice = reader + edit
	relation cfolder: folder with ipok
	permission cview = cfolder->view
}`

func traceData(t *testing.T, lines ...string) sliceReader {
	t.Helper()
	return parseRels(t, lines...)
}

var traceRelationships = []string{
	"group:eng#member@user:amy",
	"group:all#member@group:eng#member",
	"folder:f1#viewer@group:all#member",
	"folder:f2#parent@folder:f1",
	"doc:d1#folder@folder:f2",
	"doc:d1#reader@user:bob[ipok]",
	"doc:d3#reader@user:bob[ipok:{\"allowed\":\"5\"}]",
	"doc:d1#banned@user:carl",
	"doc:d1#reader@user:carl",
	"doc:d1#owner@user:dan",
	"doc:d2#owner@user:dan",
	"doc:d2#reader@user:*",
	"doc:d5#cfolder@folder:f1[ipok]",
}

// renderTrace writes one line per step: resource, relation, kind, answers per id,
// then its caveats and children indented.
func renderTrace(b *strings.Builder, n *engine.TraceNode, indent string) {
	kind := "relation"
	if n.Permission {
		kind = "permission"
	}
	answers := make([]string, len(n.IDs))
	for i, id := range n.IDs {
		r := n.Results[i]
		answers[i] = id + "=" + strings.TrimSuffix(r.Membership.String(), "_PERMISSION")
		if r.DepthExceeded {
			answers[i] = id + "=DEPTH"
		}
		if len(r.Missing) > 0 {
			answers[i] += fmt.Sprint(r.Missing)
		}
	}
	fmt.Fprintf(b, "%s%s:%s %s %s %s", indent, n.Type, strings.Join(n.IDs, ","), n.Relation, kind, strings.Join(answers, " "))
	if n.Cached {
		b.WriteString(" cached")
	}
	b.WriteByte('\n')
	for _, c := range n.Caveats {
		ctxJSON, _ := json.Marshal(c.Context)
		fmt.Fprintf(b, "%s  caveat %s on %s: %q result=%d missing=%v context=%s\n", indent, c.Caveat, c.ResourceID, c.Expression, c.Result, c.Missing, ctxJSON)
	}
	for _, c := range n.Children {
		renderTrace(b, c, indent+"  ")
	}
}

func traceCheck(check string) engine.CheckRequest {
	res, perm, subj, ctx, err := rel.ParseCheck(check)
	if err != nil {
		panic(err)
	}
	return engine.CheckRequest{Resource: res, Permission: perm, Subject: subj, Context: ctx}
}

// TestCheckTrace compares traces with the trees SpiceDB returns for the same schema,
// data and checks: a permission's children are the relations and permissions its
// rewrite names, on the same resource; an arrow's are its target on the objects the
// tupleset leads to; a relation's are the subject sets it follows.
func TestCheckTrace(t *testing.T) {
	s := mustCompile(t, traceSchema)
	r := traceData(t, traceRelationships...)
	for _, tc := range []struct {
		name, check string
		want        engine.Membership
		trace       string
	}{
		{"relation", "doc:d1#owner@user:dan", engine.HasPermission, `
doc:d1 owner relation d1=HAS
`},
		{"relation without a match", "doc:d1#owner@user:amy", engine.NoPermission, `
doc:d1 owner relation d1=NO
`},
		{"wildcard", "doc:d2#reader@user:zed", engine.HasPermission, `
doc:d2 reader relation d2=HAS
`},
		{"subject set is a member of itself", "group:eng#member@group:eng#member", engine.HasPermission, `
group:eng member relation eng=HAS
`},
		{"arrow and subject sets", "doc:d1#read@user:amy", engine.HasPermission, `
doc:d1 read permission d1=HAS
  doc:d1 reader relation d1=NO
  doc:d1 owner relation d1=NO
  folder:f2 view permission f2=HAS
    folder:f2 viewer relation f2=NO
    folder:f1 view permission f1=HAS
      folder:f1 viewer relation f1=HAS
        group:all member relation all=HAS
          group:eng member relation eng=HAS
  doc:d1 banned relation d1=NO
`},
		{"exclusion", "doc:d1#read@user:carl", engine.NoPermission, `
doc:d1 read permission d1=NO
  doc:d1 reader relation d1=HAS
  doc:d1 banned relation d1=HAS
`},
		{"intersection", "doc:d2#edit@user:dan", engine.HasPermission, `
doc:d2 edit permission d2=HAS
  doc:d2 owner relation d2=HAS
  doc:d2 reader relation d2=HAS
`},
		{"intersection cut short", "doc:d1#edit@user:amy", engine.NoPermission, `
doc:d1 edit permission d1=NO
  doc:d1 owner relation d1=NO
`},
		{"caveat missing all context", "doc:d1#reader@user:bob", engine.Conditional, `
doc:d1 reader relation d1=CONDITIONAL[ip]
  caveat ipok on d1: "ip == allowed" result=2 missing=[ip] context={}
`},
		{"caveat missing some context", `doc:d1#read@user:bob with {"ip": "1"}`, engine.Conditional, `
doc:d1 read permission d1=CONDITIONAL[allowed]
  doc:d1 reader relation d1=CONDITIONAL[allowed]
    caveat ipok on d1: "ip == allowed" result=2 missing=[allowed] context={"ip":"1"}
  doc:d1 owner relation d1=NO
  folder:f2 view permission f2=NO
    folder:f2 viewer relation f2=NO
    folder:f1 view permission f1=NO
      folder:f1 viewer relation f1=NO
        group:all member relation all=NO
          group:eng member relation eng=NO
  doc:d1 banned relation d1=NO
`},
		{"caveat with the relationship's context", `doc:d3#reader@user:bob with {"ip": "5", "other": 1}`, engine.HasPermission, `
doc:d3 reader relation d3=HAS
  caveat ipok on d3: "ip == allowed" result=1 missing=[] context={"allowed":"5","ip":"5"}
`},
		{"caveat false", `doc:d1#reader@user:bob with {"ip": "1", "allowed": "2"}`, engine.NoPermission, `
doc:d1 reader relation d1=NO
  caveat ipok on d1: "ip == allowed" result=0 missing=[] context={"allowed":"2","ip":"1"}
`},
		{"caveat on an arrow's relationship belongs to the permission", `doc:d5#cview@user:amy with {"ip": "1"}`, engine.Conditional, `
doc:d5 cview permission d5=CONDITIONAL[allowed]
  caveat ipok on d5: "ip == allowed" result=2 missing=[allowed] context={"ip":"1"}
  folder:f1 view permission f1=HAS
    folder:f1 viewer relation f1=HAS
      group:all member relation all=HAS
        group:eng member relation eng=HAS
`},
		{"subproblem met twice is answered from the request's memo", "doc:d1#twice@user:dan", engine.NoPermission, `
doc:d1 twice permission d1=NO
  doc:d1 reader relation d1=NO
  doc:d1 edit permission d1=NO
    doc:d1 owner relation d1=HAS
    doc:d1 reader relation d1=NO cached
`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, tr, err := engine.New(engine.Config{}).CheckTraced(context.Background(), s, r, traceCheck(tc.check))
			if err != nil || res.Membership != tc.want {
				t.Fatalf("%s: %v, %v; want %v", tc.check, res, err, tc.want)
			}
			var b strings.Builder
			renderTrace(&b, tr, "")
			if got := b.String(); got != tc.trace[1:] {
				t.Errorf("%s: trace\n%s\nwant\n%s", tc.check, got, tc.trace[1:])
			}
		})
	}
}

// TestCheckTraceCached: an answer from the engine's cache is a step marked cached,
// without children, whether it answers the check itself or one of its subproblems.
func TestCheckTraceCached(t *testing.T) {
	s := mustCompile(t, traceSchema)
	r := traceData(t, traceRelationships...)
	eng := engine.New(engine.Config{Cache: cache.New(1 << 20)})
	ctx := context.Background()
	trace := func(check string) string {
		t.Helper()
		_, tr, err := eng.CheckTraced(ctx, s, r, traceCheck(check))
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		renderTrace(&b, tr, "")
		return b.String()
	}
	if _, err := eng.Check(ctx, s, r, traceCheck("folder:f2#view@user:amy")); err != nil {
		t.Fatal(err)
	}
	want := `doc:d1 read permission d1=HAS
  doc:d1 reader relation d1=NO
  doc:d1 owner relation d1=NO
  folder:f2 view permission f2=HAS cached
  doc:d1 banned relation d1=NO
`
	if got := trace("doc:d1#read@user:amy"); got != want {
		t.Errorf("trace with a cached subproblem\n%s\nwant\n%s", got, want)
	}
	want = "doc:d1 read permission d1=HAS cached\n"
	if got := trace("doc:d1#read@user:amy"); got != want {
		t.Errorf("trace of a cached check\n%s\nwant\n%s", got, want)
	}
}

// TestCheckBulkTraced: each item has a step of its own over the steps of the
// evaluation it shared with the items that differ from it only in the resource.
func TestCheckBulkTraced(t *testing.T) {
	s := mustCompile(t, traceSchema)
	r := traceData(t, traceRelationships...)
	reqs := []engine.CheckRequest{
		traceCheck("doc:d1#edit@user:dan"), traceCheck("doc:d2#edit@user:dan"),
		traceCheck("doc:d2#read@user:zed"), traceCheck("doc:d2#nope@user:zed"),
	}
	res := engine.New(engine.Config{}).CheckBulkTraced(context.Background(), s, r, reqs)
	want := []string{`doc:d1 edit permission d1=NO
  doc:d1,d2 edit permission d1=NO d2=HAS
    doc:d1,d2 owner relation d1=HAS d2=HAS
    doc:d1,d2 reader relation d1=NO d2=HAS
`, `doc:d2 edit permission d2=HAS
  doc:d1,d2 edit permission d1=NO d2=HAS
    doc:d1,d2 owner relation d1=HAS d2=HAS
    doc:d1,d2 reader relation d1=NO d2=HAS
`, `doc:d2 read permission d2=HAS
  doc:d2 read permission d2=HAS
    doc:d2 reader relation d2=HAS
    doc:d2 banned relation d2=NO
`}
	for i, w := range want {
		if res[i].Err != nil || res[i].Trace == nil {
			t.Fatalf("item %d: %v, trace %v", i, res[i].Err, res[i].Trace)
		}
		var b strings.Builder
		renderTrace(&b, res[i].Trace, "")
		if got := b.String(); got != w {
			t.Errorf("item %d: trace\n%s\nwant\n%s", i, got, w)
		}
	}
	if res[0].Trace.Children[0] != res[1].Trace.Children[0] {
		t.Error("items evaluated together do not share their steps")
	}
	if res[3].Err == nil || res[3].Trace != nil {
		t.Errorf("unknown permission: %v, trace %v; want an error and no trace", res[3].Err, res[3].Trace)
	}
}

// TestCheckTraceExpiration: a step reports the earliest expiration among the
// relationships it and its children read.
func TestCheckTraceExpiration(t *testing.T) {
	s := mustCompile(t, `use expiration
definition user {}
definition group {
	relation member: user with expiration
}
definition doc {
	relation reader: user | group#member with expiration
	permission read = reader
}`)
	soon := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	later := soon.Add(time.Hour)
	r := traceData(t,
		"doc:d1#reader@group:g1#member[expiration:"+soon.Format(time.RFC3339)+"]",
		"group:g1#member@user:amy[expiration:"+later.Format(time.RFC3339)+"]",
	)
	res, tr, err := engine.New(engine.Config{}).CheckTraced(context.Background(), s, r, traceCheck("doc:d1#read@user:amy"))
	if err != nil || res.Membership != engine.HasPermission {
		t.Fatalf("check: %v, %v", res, err)
	}
	// read, then reader, which read the subject set expiring soon, then
	// group:g1#member, which read amy's membership.
	n := tr
	for depth, want := range []time.Time{soon, soon, later} {
		if n.ExpiresAt == nil || !n.ExpiresAt.Equal(want) {
			t.Errorf("%s:%v %s expires at %v; want %v", n.Type, n.IDs, n.Relation, n.ExpiresAt, want)
		}
		if depth == 2 {
			break
		}
		if len(n.Children) != 1 {
			t.Fatalf("%s:%v %s has %d children; want 1", n.Type, n.IDs, n.Relation, len(n.Children))
		}
		n = n.Children[0]
	}
}
