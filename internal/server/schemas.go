package server

import (
	"context"
	"fmt"
	"sync"

	"github.com/latch-authz/latch/internal/schema"
	"github.com/latch-authz/latch/internal/schema/ir"
	"github.com/latch-authz/latch/internal/store"
)

// maxCachedSchemas bounds the cache; a server rarely sees more than a couple of schema
// texts live at once (the current one and the one before a write).
const maxCachedSchemas = 16

// recentRevisions is how many revisions' schemas atRevision remembers: with quantized
// revisions almost every request reads at one of the last two.
const recentRevisions = 4

// schemaCache holds compiled schemas by their text (schema.Cache), so a request costs
// a hash and a map lookup instead of a compile, and by recent revision, so that most
// requests do not read the schema text at all.
type schemaCache struct {
	compiled *schema.Cache[*ir.Schema]
	empty    *ir.Schema

	mu       sync.Mutex
	byRev    [recentRevisions]revSchema // guarded by mu; a ring
	nextSlot int                        // guarded by mu
}

func newSchemaCache() *schemaCache {
	return &schemaCache{
		compiled: schema.NewCache(maxCachedSchemas, schema.CompileContext),
		empty:    ir.NewSchema(nil, nil, nil),
	}
}

// get returns the compiled form of text. The empty text is the empty schema: every
// definition is unknown, so checks fail the way SpiceDB's do before WriteSchema.
func (c *schemaCache) get(ctx context.Context, text string) (*ir.Schema, error) {
	if text == "" {
		return c.empty, nil
	}
	return c.compiled.Get(ctx, text)
}

type revSchema struct {
	rev store.Revision
	s   *ir.Schema // nil: empty slot
}

// atRevision is at for a reader opened by Store.Reader, whose revision names a
// committed state and so a schema that never changes; it remembers the schemas of the
// last few revisions asked for. (A write's validator sees a state being changed, so it
// uses at.)
func (c *schemaCache) atRevision(ctx context.Context, r store.Reader) (*ir.Schema, error) {
	rev := r.Revision()
	c.mu.Lock()
	for _, e := range c.byRev {
		if e.s != nil && e.rev == rev {
			c.mu.Unlock()
			return e.s, nil
		}
	}
	c.mu.Unlock()
	s, err := c.at(ctx, r)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.byRev[c.nextSlot] = revSchema{rev, s}
	c.nextSlot = (c.nextSlot + 1) % recentRevisions
	c.mu.Unlock()
	return s, nil
}

// at returns the schema in force at r's revision. A stored schema that no longer
// compiles is a server fault (it compiled when written), so it is not the caller's error.
func (c *schemaCache) at(ctx context.Context, r store.Reader) (*ir.Schema, error) {
	text, err := r.Schema(ctx)
	if err != nil {
		return nil, err
	}
	s, err := c.get(ctx, text)
	if ctx.Err() != nil {
		return nil, ctx.Err() // the caller has gone; the compile was abandoned
	}
	if err != nil {
		return nil, fmt.Errorf("stored schema at revision %d does not compile: %w", r.Revision(), internalError{err})
	}
	return s, nil
}

// internalError hides a lower-layer error from the mapping table, so that it is
// reported as INTERNAL even when its type would otherwise map to a client error.
type internalError struct{ err error }

func (e internalError) Error() string { return e.err.Error() }
