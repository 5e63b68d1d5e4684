package engine_test

import (
	"context"
	"iter"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/latch-authz/latch/internal/engine"
	"github.com/latch-authz/latch/internal/engine/cache"
	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/schema"
	"github.com/latch-authz/latch/internal/schema/ir"
	"github.com/latch-authz/latch/internal/store"
)

// countingReader counts the queries that reach it, optionally holding each one until
// release is closed (or for delay), at a revision of the test's choosing.
type countingReader struct {
	sliceReader
	rev     store.Revision
	queries atomic.Int32
	delay   atomic.Int64  // nanoseconds
	started chan struct{} // if not nil, closed by the first query
	once    sync.Once
}

func (r *countingReader) Revision() store.Revision { return r.rev }

func (r *countingReader) Query(ctx context.Context, f store.Filter, o store.QueryOptions) iter.Seq2[store.Item, error] {
	r.queries.Add(1)
	if r.started != nil {
		r.once.Do(func() { close(r.started) })
	}
	if d := time.Duration(r.delay.Load()); d > 0 {
		select {
		case <-time.After(d):
		case <-ctx.Done():
			return func(yield func(store.Item, error) bool) { yield(store.Item{}, ctx.Err()) }
		}
	}
	return r.sliceReader.Query(ctx, f, o)
}

const groupSchema = `definition user {}
definition group {
	relation member: user | group#member
}
definition document {
	relation viewer: user | group#member
	permission view = viewer
}`

func mustCompile(t *testing.T, src string) *ir.Schema {
	t.Helper()
	s, err := schema.Compile(src)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func relationship(resType, resID, relation, subjType, subjID, subjRel string) rel.Relationship {
	return rel.Relationship{
		Resource: rel.ObjectRef{Type: resType, ID: resID}, Relation: relation,
		Subject: rel.SubjectRef{Object: rel.ObjectRef{Type: subjType, ID: subjID}, Relation: subjRel},
	}
}

func viewCheck(doc, user string) engine.CheckRequest {
	return engine.CheckRequest{
		Resource: rel.ObjectRef{Type: "document", ID: doc}, Permission: "view",
		Subject: rel.SubjectRef{Object: rel.ObjectRef{Type: "user", ID: user}},
	}
}

// groupData: two documents viewed through one group.
var groupData = sliceReader{
	relationship("document", "a", "viewer", "group", "eng", "member"),
	relationship("document", "b", "viewer", "group", "eng", "member"),
	relationship("group", "eng", "member", "user", "amy", ""),
}

// TestSubproblemAnswersAreShared: a check's subproblems (is amy a member of eng?) are
// answered from the cache by later checks that meet them at the same revision, and
// only at that revision.
func TestSubproblemAnswersAreShared(t *testing.T) {
	s := mustCompile(t, groupSchema)
	c := cache.New(1 << 20)
	eng := engine.New(engine.Config{Cache: c})
	ctx := context.Background()
	check := func(r *countingReader, req engine.CheckRequest, want engine.Membership) int32 {
		t.Helper()
		before := r.queries.Load()
		res, err := eng.Check(ctx, s, r, req)
		if err != nil || res.Membership != want {
			t.Fatalf("check %s view %s: %v, %v; want %v", req.Resource.ID, req.Subject.Object.ID, res, err, want)
		}
		return r.queries.Load() - before
	}
	r := &countingReader{sliceReader: groupData, rev: 7}
	if n := check(r, viewCheck("a", "amy"), engine.HasPermission); n == 0 {
		t.Fatal("the first check queried nothing")
	}
	if n := check(r, viewCheck("a", "amy"), engine.HasPermission); n != 0 {
		t.Errorf("a repeated check queried the store %d times", n)
	}
	// document b's viewer relationships are new, group:eng#member@amy is not: two
	// queries for b's direct and subject-set viewers, none for the group.
	if n := check(r, viewCheck("b", "amy"), engine.HasPermission); n != 2 {
		t.Errorf("a check sharing a cached subproblem queried the store %d times, want 2", n)
	}
	if n := check(r, viewCheck("b", "bob"), engine.NoPermission); n == 0 {
		t.Error("another subject's check was answered from amy's answers")
	}
	// At another revision nothing is reused.
	r2 := &countingReader{sliceReader: groupData[:2], rev: 8}
	if n := check(r2, viewCheck("a", "amy"), engine.NoPermission); n == 0 {
		t.Error("a check at a new revision was answered from the old revision's answers")
	}

	// Bulk checks use the same answers.
	before := r.queries.Load()
	for i, br := range eng.CheckBulk(ctx, s, r, []engine.CheckRequest{viewCheck("a", "amy"), viewCheck("b", "bob")}) {
		if br.Err != nil || br.Result.Membership != []engine.Membership{engine.HasPermission, engine.NoPermission}[i] {
			t.Errorf("bulk item %d: %v", i, br)
		}
	}
	if n := r.queries.Load() - before; n != 0 {
		t.Errorf("a bulk check of cached answers queried the store %d times", n)
	}
}

// TestWildcardAnswersAreSharedAcrossSubjects: a relation of wildcards only answers
// every user alike, so one user's answer serves the next user's check; a relation that
// names users keeps each user's answer apart.
func TestWildcardAnswersAreSharedAcrossSubjects(t *testing.T) {
	s := mustCompile(t, `definition user {}
definition document {
	relation public: user:*
	relation viewer: user | user:*
	permission view = public + viewer
}`)
	eng := engine.New(engine.Config{Cache: cache.New(1 << 20)})
	ctx := context.Background()
	r := &countingReader{sliceReader: sliceReader{
		relationship("document", "open", "public", "user", "*", ""),
		relationship("document", "shut", "viewer", "user", "amy", ""),
	}, rev: 3}
	queries := func(req engine.CheckRequest, want engine.Membership) int32 {
		t.Helper()
		before := r.queries.Load()
		res, err := eng.Check(ctx, s, r, req)
		if err != nil || res.Membership != want {
			t.Fatalf("check %s view %v: %v, %v; want %v", req.Resource.ID, req.Subject, res, err, want)
		}
		return r.queries.Load() - before
	}
	queries(viewCheck("open", "amy"), engine.HasPermission)
	if n := queries(viewCheck("open", "bob"), engine.HasPermission); n != 0 {
		t.Errorf("bob's check of a public document queried the store %d times; amy's answer to public is everyone's", n)
	}
	queries(viewCheck("shut", "amy"), engine.HasPermission)
	// public is shared (no), viewer is bob's own: one query.
	if n := queries(viewCheck("shut", "bob"), engine.NoPermission); n != 1 {
		t.Errorf("bob's check of a private document queried the store %d times, want 1 (viewer; public is known)", n)
	}
}

// TestArrowsReadTheirRelationshipsOnce: the arrows of one permission over the same
// relation read its relationships once per request.
func TestArrowsReadTheirRelationshipsOnce(t *testing.T) {
	s := mustCompile(t, `definition user {
	relation self: user
	relation friend: user
	relation blocked: user
}
definition post {
	relation author: user
	permission view = author->self + (author->friend - author->blocked)
}`)
	r := &countingReader{sliceReader: sliceReader{
		relationship("post", "p", "author", "user", "ann", ""),
		relationship("user", "ann", "friend", "user", "bob", ""),
	}, rev: 1}
	res, err := engine.New(engine.Config{}).Check(context.Background(), s, r, engine.CheckRequest{
		Resource: rel.ObjectRef{Type: "post", ID: "p"}, Permission: "view",
		Subject: rel.SubjectRef{Object: rel.ObjectRef{Type: "user", ID: "bob"}},
	})
	if err != nil || res.Membership != engine.HasPermission {
		t.Fatalf("check: %v, %v", res, err)
	}
	// post:p#author once, then ann's self, friend and blocked.
	if n := r.queries.Load(); n != 4 {
		t.Errorf("the check queried the store %d times, want 4", n)
	}
}

// TestExpiringSchemasAreNotCached: with `use expiration` an answer can change at one
// revision as time passes, so nothing is cached.
func TestExpiringSchemasAreNotCached(t *testing.T) {
	s := mustCompile(t, "use expiration\n"+groupSchema)
	eng := engine.New(engine.Config{Cache: cache.New(1 << 20)})
	r := &countingReader{sliceReader: groupData, rev: 7}
	for range 2 {
		before := r.queries.Load()
		if res, err := eng.Check(context.Background(), s, r, viewCheck("a", "amy")); err != nil || res.Membership != engine.HasPermission {
			t.Fatalf("check: %v, %v", res, err)
		}
		if r.queries.Load() == before {
			t.Fatal("a check under `use expiration` was answered from the cache")
		}
	}
}

// TestIdenticalChecksShareOneEvaluation: identical checks arriving together are
// evaluated once; a follower whose leader's client went away evaluates for itself.
func TestIdenticalChecksShareOneEvaluation(t *testing.T) {
	s := mustCompile(t, groupSchema)
	eng := engine.New(engine.Config{Cache: cache.New(1 << 20)})
	alone := &countingReader{sliceReader: groupData, rev: 1}
	if _, err := engine.New(engine.Config{}).Check(context.Background(), s, alone, viewCheck("a", "amy")); err != nil {
		t.Fatal(err)
	}
	r := &countingReader{sliceReader: groupData, rev: 1}
	r.delay.Store(int64(20 * time.Millisecond))
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			if res, err := eng.Check(context.Background(), s, r, viewCheck("a", "amy")); err != nil || res.Membership != engine.HasPermission {
				t.Errorf("check: %v, %v", res, err)
			}
		})
	}
	wg.Wait()
	if got, want := r.queries.Load(), alone.queries.Load(); got != want {
		t.Errorf("20 identical concurrent checks made %d queries; one check makes %d", got, want)
	}

	slow := &countingReader{sliceReader: groupData, rev: 2, started: make(chan struct{})}
	slow.delay.Store(int64(time.Hour))
	leaderCtx, cancel := context.WithCancel(context.Background())
	leaderDone := make(chan error, 1)
	go func() {
		_, err := eng.Check(leaderCtx, s, slow, viewCheck("a", "amy"))
		leaderDone <- err
	}()
	<-slow.started
	followerDone := make(chan engine.Result, 1)
	go func() {
		res, err := eng.Check(context.Background(), s, slow, viewCheck("a", "amy"))
		if err != nil {
			t.Errorf("follower of a cancelled leader: %v", err)
		}
		followerDone <- res
	}()
	time.Sleep(10 * time.Millisecond) // let the follower join the leader's flight
	slow.delay.Store(0)
	cancel()
	if err := <-leaderDone; err == nil {
		t.Error("the cancelled leader got an answer")
	}
	if res := <-followerDone; res.Membership != engine.HasPermission {
		t.Errorf("follower of a cancelled leader: %v", res)
	}
}

// TestSiblingsKeepAnswersApart: siblings share a cache, not answers — two stores at the
// same revision number hold different data.
func TestSiblingsKeepAnswersApart(t *testing.T) {
	s := mustCompile(t, groupSchema)
	eng := engine.New(engine.Config{Cache: cache.New(1 << 20)})
	other := eng.Sibling(nil)
	withAmy := &countingReader{sliceReader: groupData, rev: 3}
	withoutAmy := &countingReader{sliceReader: groupData[:2], rev: 3}
	for range 2 {
		if res, err := eng.Check(context.Background(), s, withAmy, viewCheck("a", "amy")); err != nil || res.Membership != engine.HasPermission {
			t.Fatalf("check on the first store: %v, %v", res, err)
		}
		if res, err := other.Check(context.Background(), s, withoutAmy, viewCheck("a", "amy")); err != nil || res.Membership != engine.NoPermission {
			t.Fatalf("check on the second store, through a sibling: %v, %v", res, err)
		}
	}
}
