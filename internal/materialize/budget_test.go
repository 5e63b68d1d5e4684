package materialize

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/schema"
	"github.com/latch-authz/latch/internal/schema/ir"
	"github.com/latch-authz/latch/internal/store"
	"github.com/latch-authz/latch/internal/store/memory"
)

// TestBudgetShared builds the indexes of two stores on one budget: the first, alone
// in it, holds all it would hold on a budget of its own; the second drops members
// and ancestors that do not fit beside it; the budget counts both, and what each
// gives back when released. A budget that cannot hold the second's sets beside the
// first turns the second off, and its failed build gives back what it took.
func TestBudgetShared(t *testing.T) {
	ctx := context.Background()
	s, err := schema.Compile(nestedSchema)
	if err != nil {
		t.Fatal(err)
	}
	a, revA, _ := nestedGroups(t, 1, 6, 10, 3000)
	defer a.Close()
	b, revB, _ := nestedGroups(t, 2, 6, 10, 3000)
	defer b.Close()
	build := func(ms *memory.Store, rev store.Revision, budget *Budget) (*state, error) {
		return New(Config{Store: ms, Retain: time.Hour, Budget: budget}).build(ctx, planFor(s), rev)
	}
	alone := func(ms *memory.Store, rev store.Revision) *state {
		st, err := build(ms, rev, nil)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	sa, sb := alone(a, revA), alone(b, revB)
	if sb.droppable == 0 {
		t.Fatal("the second index holds no members or ancestors to drop")
	}

	// Room for the first index whole and the second's sets with half its members.
	budget := NewBudget(sa.bytes.Load() + sb.bytes.Load() - sb.droppable/2)
	ya, err := build(a, revA, budget)
	if err != nil {
		t.Fatal(err)
	}
	if ya.entries.Load() != sa.entries.Load() || ya.bytes.Load() != sa.bytes.Load() {
		t.Fatalf("first index: %d entries in %d bytes, %d in %d alone", ya.entries.Load(), ya.bytes.Load(), sa.entries.Load(), sa.bytes.Load())
	}
	yb, err := build(b, revB, budget)
	if err != nil {
		t.Fatal(err)
	}
	if yb.entries.Load() >= sb.entries.Load() {
		t.Fatalf("second index: %d entries beside the first, %d alone: none dropped", yb.entries.Load(), sb.entries.Load())
	}
	if used := budget.Used(); used != ya.bytes.Load()+yb.bytes.Load() || used > budget.max {
		t.Fatalf("budget of %d: %d used, the indexes hold %d and %d", budget.max, used, ya.bytes.Load(), yb.bytes.Load())
	}
	ya.release()
	if used := budget.Used(); used != yb.bytes.Load() {
		t.Fatalf("first index released: %d used, the second holds %d", used, yb.bytes.Load())
	}
	yb.release()

	// Room for the first index and not the second's sets.
	small := NewBudget(sa.bytes.Load() + (sb.bytes.Load()-sb.droppable)/2)
	ya, err = build(a, revA, small)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := build(b, revB, small); !errors.Is(err, errTooBig) {
		t.Fatalf("second index on a budget too small for its sets: %v, want errTooBig", err)
	}
	if used := small.Used(); used != ya.bytes.Load() {
		t.Fatalf("after the failed build %d used, the first index holds %d", used, ya.bytes.Load())
	}
}

// TestShedAgrees builds indexes on budgets their builds must shed to keep to (a build
// places members and ancestors before it counts the sets' summaries): each holds no
// more than its budget, and what it still answers of users' groups is what the index
// on a budget of its own answers; it leaves the rest to evaluation.
func TestShedAgrees(t *testing.T) {
	s, err := schema.Compile(nestedSchema)
	if err != nil {
		t.Fatal(err)
	}
	ms, rev, byLevel := nestedGroups(t, 2, 6, 10, 3000)
	defer ms.Close()
	index := func(budget *Budget) *Index { return builtIndex(t, s, ms, rev, budget) }
	full := index(nil)
	all := full.cur.Load()
	member := s.Definition("group").Relation("member")
	for _, part := range []int64{4, 16} {
		tight := index(NewBudget(all.bytes.Load() - all.droppable/part))
		if held, max := tight.cur.Load().bytes.Load(), tight.cfg.Budget.max; held > max {
			t.Fatalf("%d bytes held on a budget of %d", held, max)
		}
		known, left := agree(t, member, full, tight, rev, users(3000), byLevel)
		if known == 0 || left == 0 {
			t.Fatalf("budget less 1/%d of what may be dropped: %d answers known and %d left to evaluation, want some of each", part, known, left)
		}
	}
}

// builtIndex returns an index of ms built at rev on budget (nil: one of its own).
func builtIndex(t *testing.T, s *ir.Schema, ms *memory.Store, rev store.Revision, budget *Budget) *Index {
	t.Helper()
	x := New(Config{Store: ms, Retain: time.Hour, Budget: budget})
	st, err := x.build(context.Background(), planFor(s), rev)
	if err != nil {
		t.Fatal(err)
	}
	x.cur.Store(st)
	return x
}

func users(n int) []rel.SubjectRef {
	out := make([]rel.SubjectRef, n)
	for u := range out {
		out[u] = rel.SubjectRef{Object: rel.ObjectRef{Type: "user", ID: fmt.Sprint("u", u)}}
	}
	return out
}

// agree fails t unless every answer tight gives at rev of whether subjects are in the
// groups' member sets is full's, and returns how many it gave and how many it left to
// evaluation.
func agree(t *testing.T, member *ir.Relation, full, tight *Index, rev store.Revision, subjects []rel.SubjectRef, groups [][]string) (known, left int) {
	t.Helper()
	for _, subject := range subjects {
		want, got := full.View(context.Background(), rev, subject), tight.View(context.Background(), rev, subject)
		if got == nil {
			left++
			continue
		}
		for _, level := range groups {
			for _, g := range level {
				yes, ok := got(member, g, 50)
				if !ok {
					left++
					continue
				}
				known++
				if wantYes, wantOK := want(member, g, 50); !wantOK || yes != wantYes {
					t.Fatalf("revision %d: %v in group %s: %v, the full index says %v (known %v)", rev, subject, g, yes, wantYes, wantOK)
				}
			}
		}
	}
	return known, left
}

// TestShedAfterBuild: an index built within its budget and then fed revisions that add
// groups (whose edges and summaries it always holds) and members holds no more than
// the budget after each of them: the revisions drop subjects' sets, and sets'
// ancestors, as a build does. What it still answers at each revision is what the index
// on a budget of its own answers.
func TestShedAfterBuild(t *testing.T) {
	ctx := context.Background()
	s, err := schema.Compile(nestedSchema)
	if err != nil {
		t.Fatal(err)
	}
	ms, rev0, byLevel := nestedGroups(t, 3, 5, 10, 2000)
	defer ms.Close()
	index := func(budget *Budget) *Index { return builtIndex(t, s, ms, rev0, budget) }
	full := index(nil)
	budget := NewBudget(full.cur.Load().bytes.Load())
	tight := index(budget)
	if dropped := full.cur.Load().entries.Load() - tight.cur.Load().entries.Load(); dropped != 0 {
		t.Fatalf("the build on a budget of all it holds dropped %d entries", dropped)
	}
	member := s.Definition("group").Relation("member")
	rnd := rand.New(rand.NewPCG(3, 1))
	groups := slices.Concat(byLevel...)
	subjects := users(2000)
	watch, stop := iter.Pull2(ms.Watch(ctx, rev0, store.WatchOptions{}))
	defer stop()
	var left int
	for r := range 6 {
		var updates []store.Update
		add := func(g string, subject rel.SubjectRef) {
			updates = append(updates, store.Update{Op: store.Touch, Relationship: rel.Relationship{
				Resource: rel.ObjectRef{Type: "group", ID: g}, Relation: "member", Subject: subject,
			}})
		}
		var added []string
		for i := range 60 {
			g := fmt.Sprintf("r%dg%d", r, i)
			add(groups[rnd.IntN(len(groups))], rel.SubjectRef{Object: rel.ObjectRef{Type: "group", ID: g}, Relation: "member"})
			added = append(added, g)
		}
		for i := range 150 {
			u := rel.SubjectRef{Object: rel.ObjectRef{Type: "user", ID: fmt.Sprintf("r%du%d", r, i)}}
			subjects = append(subjects, u)
			add(added[rnd.IntN(len(added))], u)
		}
		groups = append(groups, added...)
		rev, err := ms.Write(ctx, nil, updates, nil)
		if err != nil {
			t.Fatal(err)
		}
		ch, err, ok := watch()
		if !ok || err != nil || ch.Revision != rev {
			t.Fatalf("watch: %v %v", ch.Revision, err)
		}
		for _, x := range []*Index{full, tight} {
			if err := x.cur.Load().apply(ch); err != nil {
				t.Fatal(err)
			}
		}
		if held := tight.cur.Load().bytes.Load(); held > budget.max || budget.Used() != held {
			t.Fatalf("revision %d: %d bytes held (the budget counts %d) on a budget of %d", rev, held, budget.Used(), budget.max)
		}
		var sample []rel.SubjectRef
		for i := r; i < len(subjects); i += 13 {
			sample = append(sample, subjects[i])
		}
		_, left = agree(t, member, full, tight, rev, sample, [][]string{groups})
	}
	if left == 0 {
		t.Fatal("past its budget, the index still answers every user's groups")
	}
}
