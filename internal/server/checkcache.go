package server

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"hash/maphash"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/singleflight"

	"github.com/latch-authz/latch/internal/engine"
	"github.com/latch-authz/latch/internal/engine/cache"
	"github.com/latch-authz/latch/internal/schema/ir"
	"github.com/latch-authz/latch/internal/store"
)

// checkCache remembers definite check answers by revision, so that requests at the
// same (quantized) revision share them. A revision fixes the schema and the data, so
// an answer never goes stale — except through relationship expiration, which changes
// answers as time passes at one revision; schemas that `use expiration` are therefore
// not cached. Conditional answers are not cached either (their missing-parameter lists
// do not fit the fixed-size entries).
type checkCache struct {
	c     *cache.Cache
	seeds [2]maphash.Seed
	// flight shares one evaluation among identical checks arriving together.
	flight singleflight.Group
}

const (
	cachedHas cache.Value = 1
	cachedNo  cache.Value = 2
)

func newCheckCache(maxBytes int64, m *metrics) *checkCache {
	if maxBytes <= 0 {
		return nil
	}
	cc := &checkCache{c: cache.New(maxBytes), seeds: [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()}}
	stat := func(f func(cache.Stats) float64) func() float64 { return func() float64 { return f(cc.c.Stats()) } }
	m.registry.MustRegister(
		prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: "latch", Subsystem: "check_cache", Name: "hits_total", Help: "Checks answered from the cache."},
			stat(func(s cache.Stats) float64 { return float64(s.Hits) })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: "latch", Subsystem: "check_cache", Name: "misses_total", Help: "Checks the cache could not answer."},
			stat(func(s cache.Stats) float64 { return float64(s.Misses) })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: "latch", Subsystem: "check_cache", Name: "evictions_total", Help: "Answers evicted to make room."},
			stat(func(s cache.Stats) float64 { return float64(s.Evictions) })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "latch", Subsystem: "check_cache", Name: "bytes", Help: "Memory the cache holds (fixed at start)."},
			stat(func(s cache.Stats) float64 { return float64(s.Bytes) })),
	)
	return cc
}

// key hashes everything a check's answer depends on at a revision.
func (cc *checkCache) key(rev store.Revision, req engine.CheckRequest) (cache.Key, bool) {
	var ctx []byte
	if len(req.Context) > 0 {
		var err error
		if ctx, err = json.Marshal(req.Context); err != nil { // sorted keys: one text per context
			return cache.Key{}, false
		}
	}
	var out [2]uint64
	for i, seed := range cc.seeds {
		var h maphash.Hash
		h.SetSeed(seed)
		var b [8]byte
		for j := range b {
			b[j] = byte(rev >> (8 * j))
		}
		h.Write(b[:])
		for _, s := range []string{req.Resource.Type, req.Resource.ID, req.Permission, req.Subject.Object.Type, req.Subject.Object.ID, req.Subject.Relation} {
			h.WriteString(s)
			h.WriteByte(0)
		}
		h.Write(ctx)
		out[i] = h.Sum64()
	}
	return cache.Key{Hi: out[0], Lo: out[1]}, true
}

// get returns the cached answer of req, and the key to store a fresh one under.
func (cc *checkCache) get(sch *ir.Schema, rev store.Revision, req engine.CheckRequest) (engine.Result, cache.Key, bool, bool) {
	if cc == nil || sch.Uses("expiration") {
		return engine.Result{}, cache.Key{}, false, false
	}
	k, ok := cc.key(rev, req)
	if !ok {
		return engine.Result{}, k, false, false
	}
	switch v, hit := cc.c.Get(k); {
	case hit && v == cachedHas:
		return engine.Result{Membership: engine.HasPermission}, k, true, true
	case hit && v == cachedNo:
		return engine.Result{Membership: engine.NoPermission}, k, true, true
	}
	return engine.Result{}, k, true, false
}

// compute evaluates a check the cache missed. Identical concurrent checks (same key)
// share one evaluation; if the one evaluating gave up (its client went away) the others
// evaluate for themselves rather than inherit its cancellation. The answer is cached.
func (cc *checkCache) compute(ctx context.Context, k cache.Key, cacheable bool, eval func(context.Context) (engine.Result, error)) (engine.Result, error) {
	if cc == nil || !cacheable {
		return eval(ctx)
	}
	var b [16]byte
	binary.LittleEndian.PutUint64(b[:8], k.Hi)
	binary.LittleEndian.PutUint64(b[8:], k.Lo)
	v, err, _ := cc.flight.Do(string(b[:]), func() (any, error) { return eval(ctx) })
	if err != nil && ctx.Err() == nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		v, err = eval(ctx)
	}
	if err != nil {
		return engine.Result{}, err
	}
	res := v.(engine.Result)
	cc.put(k, res)
	return res, nil
}

// put stores a definite answer.
func (cc *checkCache) put(k cache.Key, res engine.Result) {
	switch res.Membership {
	case engine.HasPermission:
		cc.c.Put(k, cachedHas)
	case engine.NoPermission:
		cc.c.Put(k, cachedNo)
	}
}

// bulk answers the items of a bulk check it has cached and evaluates the rest in one
// eval call (so the engine still batches them), caching their definite answers.
func (cc *checkCache) bulk(sch *ir.Schema, rev store.Revision, reqs []engine.CheckRequest, eval func([]engine.CheckRequest) []engine.BulkResult) []engine.BulkResult {
	if cc == nil || sch.Uses("expiration") {
		return eval(reqs)
	}
	out := make([]engine.BulkResult, len(reqs))
	var missed []int
	var keys []cache.Key
	var cacheable []bool
	var missReqs []engine.CheckRequest
	for i, req := range reqs {
		res, k, ok, hit := cc.get(sch, rev, req)
		if hit {
			out[i].Result = res
			continue
		}
		missed, missReqs = append(missed, i), append(missReqs, req)
		keys, cacheable = append(keys, k), append(cacheable, ok)
	}
	if len(missed) == 0 {
		return out
	}
	results := eval(missReqs)
	if len(results) != len(missReqs) {
		return results // the caller reports the mismatch
	}
	for j, i := range missed {
		out[i] = results[j]
		if results[j].Err == nil && cacheable[j] {
			cc.put(keys[j], results[j].Result)
		}
	}
	return out
}
