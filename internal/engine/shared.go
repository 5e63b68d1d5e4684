package engine

import (
	"context"
	"encoding/binary"
	"errors"
	"hash/maphash"

	"github.com/latch-authz/latch/internal/engine/cache"
	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/schema/ir"
	"github.com/latch-authz/latch/internal/store"
)

const (
	cachedHas cache.Value = 1
	cachedNo  cache.Value = 2
)

// shared is one request's view of the engine's cache of definite subproblem answers.
// A subproblem's answer depends on the revision (which fixes the schema and the data),
// the subject, the caveat context, the relation and the resource id; base holds the
// hash state of the first three, so a key costs only the hashing of the last two.
//
// A relation of wildcards only answers every object subject of one type alike, so its
// answers are keyed by the subject's type (anyBase, the key a `type:*` subject has):
// `content:c1#public` is remembered once for all users, not once for each.
//
// Relationship expiration changes answers as time passes at one revision, so schemas
// that `use expiration` are not cached; conditional answers and answers cut off by the
// depth limit are never stored.
type shared struct {
	c       *cache.Cache // nil: caching is off for this request
	base    [2]maphash.Hash
	anyBase [2]maphash.Hash
	object  bool // the subject is an object, not a subject set: anyBase applies
}

// sharedFor prepares the cache keys of a request whose caveat context has the text
// ctxJSON (contextJSON), or returns a shared that caches nothing.
func (e *Engine) sharedFor(s *ir.Schema, rev store.Revision, subject rel.SubjectRef, ctxJSON []byte) shared {
	if e.cache == nil || s.Uses("expiration") {
		return shared{}
	}
	sh := shared{c: e.cache, object: subject.Relation == ""}
	var revBytes [8]byte
	binary.LittleEndian.PutUint64(revBytes[:], uint64(rev))
	start := func(h *maphash.Hash, seed maphash.Seed, s rel.SubjectRef) {
		h.SetSeed(seed)
		h.Write(revBytes[:])
		for _, f := range [...]string{s.Object.Type, s.Object.ID, s.Relation} {
			h.WriteString(f)
			h.WriteByte(0)
		}
		h.Write(ctxJSON)
		h.WriteByte(0)
	}
	for i := range sh.base {
		start(&sh.base[i], e.seeds[i], subject)
		if sh.object {
			start(&sh.anyBase[i], e.seeds[i], anySubject(subject))
		}
	}
	return sh
}

// anySubject is the wildcard of subject's type, which names every object of it.
func anySubject(subject rel.SubjectRef) rel.SubjectRef {
	return rel.SubjectRef{Object: rel.ObjectRef{Type: subject.Object.Type, ID: rel.Wildcard}}
}

// key names subproblem r on resource id. The relation is named by its id: the
// revision in base fixes the schema text, and compiling one text numbers its
// relations the same way every time.
func (sh *shared) key(r *ir.Relation, id string) cache.Key {
	base := &sh.base
	if sh.object && r.WildcardsOnly() {
		base = &sh.anyBase
	}
	var out [2]uint64
	var rid [4]byte
	binary.LittleEndian.PutUint32(rid[:], uint32(r.ID))
	for i := range base {
		h := base[i]
		h.Write(rid[:])
		h.WriteString(id)
		out[i] = h.Sum64()
	}
	return cache.Key{Hi: out[0], Lo: out[1]}
}

// get returns a cached answer.
func (sh *shared) get(k cache.Key) (outcome, bool) {
	switch v, hit := sh.c.Get(k); {
	case hit && v == cachedHas:
		return outHas, true
	case hit && v == cachedNo:
		return outNo, true
	}
	return outcome{}, false
}

// put stores o if it is definite.
func (sh *shared) put(k cache.Key, o outcome) {
	switch o.st {
	case has:
		sh.c.Put(k, cachedHas)
	case no:
		sh.c.Put(k, cachedNo)
	}
}

// checkShared answers one check through the cache. Identical concurrent checks that
// miss share one evaluation; if the one evaluating gave up (its client went away) the
// others evaluate for themselves rather than inherit its cancellation.
func (e *Engine) checkShared(ctx context.Context, s *ir.Schema, r store.Reader, req CheckRequest, sh shared) (Result, error) {
	relation := s.Definition(req.Resource.Type).Relation(req.Permission)
	k := sh.key(relation, req.Resource.ID)
	if o, ok := sh.get(k); ok {
		statsFrom(ctx).count(false, 1)
		return toResult(o)
	}
	eval := func() (Result, error) {
		ev := newEvaluator(s, r, req.Subject, req.Context, sh)
		ev.index, ev.fga = e.index, e.sem == OpenFGA
		defer ev.release()
		res, err := ev.relation(ctx, relation, []string{req.Resource.ID}, e.maxDepth)
		if err != nil {
			return Result{}, err
		}
		return toResult(res.get(req.Resource.ID))
	}
	var b [16]byte
	binary.LittleEndian.PutUint64(b[:8], k.Hi)
	binary.LittleEndian.PutUint64(b[8:], k.Lo)
	v, err, _ := e.flight.Do(string(b[:]), func() (any, error) { return eval() })
	if err != nil && ctx.Err() == nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		return eval()
	}
	if err != nil {
		return Result{}, err
	}
	return v.(Result), nil
}
