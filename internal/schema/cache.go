package schema

import (
	"context"
	"crypto/sha256"
	"sync"
)

// Cache keeps compiled schemas by the SHA-256 of their text, so that a request costs a
// hash and a map lookup instead of a compile. V is what the caller keeps per text (the
// SpiceDB API an *ir.Schema, the Permify API the schema with its Permify reading).
// Once it holds max entries the oldest leaves first. It is safe for concurrent use.
type Cache[V any] struct {
	max     int
	compile func(ctx context.Context, text string) (V, error)

	mu     sync.Mutex
	byHash map[[sha256.Size]byte]V // guarded by mu
	order  [][sha256.Size]byte     // guarded by mu; insertion order, for eviction
}

// NewCache returns a cache of at most max entries that compiles with compile.
// A compile ended by its caller's context is not kept either.
func NewCache[V any](max int, compile func(ctx context.Context, text string) (V, error)) *Cache[V] {
	return &Cache[V]{max: max, compile: compile, byHash: map[[sha256.Size]byte]V{}}
}

// Get returns the compiled form of text; a text that does not compile is not kept.
func (c *Cache[V]) Get(ctx context.Context, text string) (V, error) {
	h := sha256.Sum256([]byte(text))
	c.mu.Lock()
	v, ok := c.byHash[h]
	c.mu.Unlock()
	if ok {
		return v, nil
	}
	v, err := c.compile(ctx, text)
	if err != nil {
		return v, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if kept, ok := c.byHash[h]; ok {
		return kept, nil // another caller compiled it first: share one copy
	}
	if len(c.order) >= c.max {
		delete(c.byHash, c.order[0])
		c.order = c.order[1:]
	}
	c.byHash[h] = v
	c.order = append(c.order, h)
	return v, nil
}
