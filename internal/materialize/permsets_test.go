package materialize

import (
	"context"
	"errors"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/latch-authz/latch/internal/engine"
	"github.com/latch-authz/latch/internal/engine/enginetest"
	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/schema"
	"github.com/latch-authz/latch/internal/schema/ir"
	"github.com/latch-authz/latch/internal/store"
	"github.com/latch-authz/latch/internal/store/memory"
)

// lookupAll reads the whole permission sets at rev, limit pairs per call, each call
// resuming from the position the last pair of the previous one gave.
func lookupAll(t *testing.T, p *PermissionSets, rev store.Revision, limit int) map[Pair]bool {
	t.Helper()
	out := map[Pair]bool{}
	var pos LookupPosition
	for {
		n := 0
		err := p.Lookup(context.Background(), rev, pos, func(pr Pair, next LookupPosition) bool {
			if out[pr] {
				t.Fatalf("revision %d: pair %v sent twice", rev, pr)
			}
			out[pr] = true
			pos = next
			n++
			return n < limit
		})
		if err != nil {
			t.Fatal(err)
		}
		if n < limit {
			return out
		}
	}
}

// validTargets returns up to three targets s can stream.
func validTargets(s *ir.Schema, rnd *rand.Rand) []Target {
	var all []Target
	for _, r := range s.Relations {
		for _, d := range s.Definitions {
			t := Target{r.Def.Name, r.Name, d.Name}
			if ValidateTargets(s, []Target{t}) == nil {
				all = append(all, t)
			}
		}
	}
	rnd.Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
	return all[:min(3, len(all))]
}

// TestWatchReproducesLookup: on random schemas and histories, the events of
// WatchPermissionSets applied to an empty table (from before the first relationship) give,
// at every completed revision, exactly LookupPermissionSets at that revision (read in
// small pages resumed from their positions).
func TestWatchReproducesLookup(t *testing.T) {
	ctx := context.Background()
	tested := 0
	for seed := range uint64(60) {
		opts := enginetest.AllTraits
		opts.Nested = true
		g := enginetest.New(rand.New(rand.NewPCG(seed, 9)), opts)
		text := g.Schema()
		s, err := schema.Compile(text)
		if err != nil {
			continue
		}
		targets := validTargets(s, g.Rnd)
		ms := memory.New(memory.Options{GCInterval: -1})
		schemaRev, err := ms.WriteSchema(ctx, text, nil)
		if err != nil {
			t.Fatal(err)
		}
		p := NewPermissionSets(ms, func(context.Context, store.Revision) (*ir.Schema, error) { return s, nil }, targets)
		now := time.Now()
		live := map[rel.Key]rel.Relationship{}
		write := func(n int) store.Revision {
			var updates []store.Update
			for _, k := range slices.SortedFunc(maps.Keys(live), store.CompareKeys) {
				if g.Rnd.IntN(4) == 0 {
					updates = append(updates, store.Update{Op: store.Delete, Relationship: live[k]})
					delete(live, k)
				}
			}
			for _, x := range g.Relationships(n, now) {
				if slices.ContainsFunc(updates, func(u store.Update) bool { return u.Relationship.Key() == x.Key() }) {
					continue
				}
				updates = append(updates, store.Update{Op: store.Touch, Relationship: x})
				live[x.Key()] = x
			}
			rev, err := ms.Write(ctx, nil, updates, nil)
			if err != nil {
				t.Fatal(err)
			}
			return rev
		}
		// The watch starts before any relationship, from an empty table.
		table := lookupAll(t, p, schemaRev, 7)
		if len(table) != 0 {
			t.Fatalf("seed %d: sets %v before any relationship", seed, table)
		}
		if len(lookupAll(t, p, write(30+g.Rnd.IntN(30)), 7)) > 0 {
			tested++
		}
		var last store.Revision
		for range 6 {
			last = write(1 + g.Rnd.IntN(10))
		}
		wctx, cancel := context.WithCancel(ctx)
		completed := 0
		for ev, err := range p.Watch(wctx, ms, schemaRev, 0) {
			if err != nil {
				if wctx.Err() != nil {
					break
				}
				t.Fatal(err)
			}
			switch ev.Kind {
			case EventChange:
				if table[ev.Pair] == ev.Added {
					t.Fatalf("seed %d revision %d: change %v added=%v does not change the table", seed, ev.Revision, ev.Pair, ev.Added)
				}
				if ev.Added {
					table[ev.Pair] = true
				} else {
					delete(table, ev.Pair)
				}
			case EventCompleted:
				completed++
				want := lookupAll(t, p, ev.Revision, 5)
				if !maps.Equal(table, want) {
					t.Fatalf("seed %d schema\n%s\ntargets %v revision %d: events applied give\n%s\nlookup gives\n%s", seed, text, targets, ev.Revision, pairLines(table), pairLines(want))
				}
			default:
				t.Fatalf("unexpected event %v", ev)
			}
			if ev.Kind == EventCompleted && ev.Revision >= last {
				cancel()
			}
		}
		cancel()
		if completed != 7 {
			t.Fatalf("seed %d: %d revisions completed, want 7", seed, completed)
		}
		ms.Close()
	}
	if tested < 30 {
		t.Fatalf("only %d histories had permission sets", tested)
	}
}

func pairLines(m map[Pair]bool) string {
	var out []string
	for p := range m {
		out = append(out, "  "+p.Set.String()+" <- "+p.Child.Type+":"+p.Child.ID+"#"+p.Child.Relation)
	}
	slices.Sort(out)
	return strings.Join(out, "\n")
}

// TestTargetsErrors: each kind of bad configuration is refused naming what is wrong,
// wrapping the schema's error for an unknown name.
func TestTargetsErrors(t *testing.T) {
	s, err := schema.Compile(`
definition user {}
definition group {
	relation member: user | group#member
}
definition document {
	relation viewer: user | group#member
	relation banned: user
	permission view = viewer
	permission strict = viewer - banned
	permission nobody = banned
}`)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		entry, want string
		is          any
	}{
		{"doc#view@user", "resource type: no definition `doc`", &ir.UnknownDefinitionError{}},
		{"document#edit@user", "permission: definition `document` has no relation or permission `edit`", &ir.UnknownRelationError{}},
		{"document#view@robot", "subject type: no definition `robot`", &ir.UnknownDefinitionError{}},
		{"document#nobody@group", "no path of `document#nobody` reaches a subject of type `group`", nil},
		{"document#strict@user", "`document#strict` has an exclusion", nil},
	} {
		ts, err := ParseTargets(tc.entry)
		if err != nil {
			t.Fatal(err)
		}
		err = ValidateTargets(s, ts)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), tc.entry) {
			t.Errorf("%s: got %v, want one naming %q", tc.entry, err, tc.want)
		}
		switch tc.is.(type) {
		case *ir.UnknownDefinitionError:
			if _, ok := errors.AsType[*ir.UnknownDefinitionError](err); !ok {
				t.Errorf("%s: %v does not wrap an UnknownDefinitionError", tc.entry, err)
			}
		case *ir.UnknownRelationError:
			if _, ok := errors.AsType[*ir.UnknownRelationError](err); !ok {
				t.Errorf("%s: %v does not wrap an UnknownRelationError", tc.entry, err)
			}
		}
	}
	for _, bad := range []string{"document", "document#view", "document#view@user@x", "document#@user", "document#view@"} {
		if _, err := ParseTargets(bad); err == nil {
			t.Errorf("ParseTargets(%q) accepted it", bad)
		}
	}
	ts, err := ParseTargets("// streamed\ndocument#view@user, group#member@user\n\n# again\ndocument#view@user\n")
	if err != nil || len(ts) != 2 || ValidateTargets(s, ts) != nil {
		t.Fatalf("got %v, %v", ts, err)
	}
}

// TestHistoryGone: a watch or lookup of a revision the store no longer keeps fails
// telling the client what to do, and is still store.ErrRevisionGone.
func TestHistoryGone(t *testing.T) {
	ctx := context.Background()
	ms := memory.New(memory.Options{GCWindow: time.Hour, GCInterval: -1})
	defer ms.Close()
	s, err := schema.Compile("definition user {}\ndefinition group { relation member: user | group#member }")
	if err != nil {
		t.Fatal(err)
	}
	p := NewPermissionSets(ms, func(context.Context, store.Revision) (*ir.Schema, error) { return s, nil }, nil)
	x := rel.Relationship{Resource: rel.ObjectRef{Type: "group", ID: "g"}, Relation: "member", Subject: rel.SubjectRef{Object: rel.ObjectRef{Type: "user", ID: "u"}}}
	old, err := ms.Write(ctx, nil, []store.Update{{Op: store.Touch, Relationship: x}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ms.Write(ctx, nil, []store.Update{{Op: store.Delete, Relationship: x}}, nil); err != nil {
		t.Fatal(err)
	}
	ms.GC(time.Now().Add(2 * time.Hour))
	for what, err := range map[string]error{
		"lookup": p.Lookup(ctx, old, LookupPosition{}, func(Pair, LookupPosition) bool { return true }),
		"watch": func() error {
			for _, err := range p.Watch(ctx, ms, old-1, 0) {
				if err != nil {
					return err
				}
			}
			return nil
		}(),
	} {
		if !errors.Is(err, store.ErrRevisionGone) || !strings.Contains(err.Error(), "run LookupPermissionSets again") {
			t.Errorf("%s: got %v", what, err)
		}
	}
}

// TestSetsAgreeWithChecks: on random schemas without caveats or expiration, a subject
// reaches a target's set through the permission sets by AuthZed's documented join
// (its member rows, then ONE hop through the child sets, which the closure makes
// enough) exactly when a check says it has the permission, nesting cycles included.
func TestSetsAgreeWithChecks(t *testing.T) {
	ctx := context.Background()
	eng := engine.New(engine.Config{})
	compared := 0
	for seed := range uint64(80) {
		g := enginetest.New(rand.New(rand.NewPCG(seed, 11)), enginetest.Options{Nested: true})
		text := g.Schema()
		s, err := schema.Compile(text)
		if err != nil {
			continue
		}
		targets := validTargets(s, g.Rnd)
		if len(targets) == 0 {
			continue
		}
		ms := memory.New(memory.Options{GCInterval: -1})
		var updates []store.Update
		for _, x := range g.Relationships(40, time.Now()) {
			updates = append(updates, store.Update{Op: store.Touch, Relationship: x})
		}
		rev, err := ms.Write(ctx, nil, updates, nil)
		if err != nil {
			t.Fatal(err)
		}
		p := NewPermissionSets(ms, func(context.Context, store.Revision) (*ir.Schema, error) { return s, nil }, targets)
		table := lookupAll(t, p, rev, 1000)
		r, err := ms.Reader(ctx, rev)
		if err != nil {
			t.Fatal(err)
		}
		for _, tg := range targets {
			for _, sid := range enginetest.IDs(tg.SubjectType) {
				direct, in := map[SetRef]bool{}, map[SetRef]bool{}
				for pr := range table {
					if !pr.Child.IsSet && pr.Child.Type == tg.SubjectType && pr.Child.Relation == "" && (pr.Child.ID == sid || pr.Child.ID == rel.Wildcard) {
						direct[pr.Set], in[pr.Set] = true, true
					}
				}
				for pr := range table {
					if pr.Child.IsSet && direct[setOf(pr.Child)] {
						in[pr.Set] = true
					}
				}
				for _, id := range enginetest.IDs(tg.Resource) {
					res, err := eng.Check(ctx, s, r, engine.CheckRequest{
						Resource: rel.ObjectRef{Type: tg.Resource, ID: id}, Permission: tg.Permission,
						Subject: rel.SubjectRef{Object: rel.ObjectRef{Type: tg.SubjectType, ID: sid}},
					})
					if err != nil {
						continue
					}
					compared++
					got := in[SetRef{tg.Resource, id, tg.Permission}]
					if want := res.Membership == engine.HasPermission; got != want {
						t.Fatalf("seed %d schema\n%s\n%s:%s#%s@%s:%s: the sets say %v, a check %v\nsets:\n%s", seed, text, tg.Resource, id, tg.Permission, tg.SubjectType, sid, got, res.Membership, pairLines(table))
					}
				}
			}
		}
		ms.Close()
	}
	if compared < 500 {
		t.Fatalf("only %d checks compared", compared)
	}
}
