package permify

import (
	"context"
	"crypto/sha256"
	"strings"
	"sync"

	"google.golang.org/grpc/codes"

	"github.com/latch-authz/latch/internal/schema"
	"github.com/latch-authz/latch/internal/schema/ir"
	"github.com/latch-authz/latch/internal/schema/perm"
	"github.com/latch-authz/latch/internal/server/zedtoken"
	"github.com/latch-authz/latch/internal/store"
)

// view is a compiled schema with its Permify reading.
type view struct {
	s    *ir.Schema
	info *perm.Info
}

// maxCachedSchemas bounds the cache; tenants rarely have more than a few live versions.
const maxCachedSchemas = 64

// schemaCache holds compiled schemas by the hash of their stored text.
type schemaCache struct {
	mu     sync.Mutex
	byHash map[[sha256.Size]byte]*view // guarded by mu
	order  [][sha256.Size]byte         // guarded by mu; insertion order, for eviction
}

func newSchemaCache() *schemaCache { return &schemaCache{byHash: map[[sha256.Size]byte]*view{}} }

func (c *schemaCache) get(text string) (*view, error) {
	h := sha256.Sum256([]byte(text))
	c.mu.Lock()
	v, ok := c.byHash[h]
	c.mu.Unlock()
	if ok {
		return v, nil
	}
	var s *ir.Schema
	var err error
	if src, ok := strings.CutPrefix(text, sourceHeader); ok {
		s, err = perm.CompileWith(src, perm.Options{PermifyNames: true})
	} else {
		s, err = schema.Compile(text)
	}
	if err != nil {
		return nil, err
	}
	v = &view{s: s, info: perm.Inspect(s)}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.byHash[h]; !ok {
		if len(c.order) >= maxCachedSchemas {
			delete(c.byHash, c.order[0])
			c.order = c.order[1:]
		}
		c.byHash[h] = v
		c.order = append(c.order, h)
	}
	return v, nil
}

// metadata is the request metadata every Permify call may carry.
type metadata struct {
	SnapToken      string `json:"snap_token"`
	SchemaVersion  string `json:"schema_version"`
	Depth          int    `json:"depth"`
	OnlyPermission bool   `json:"only_permission"`
}

// reader opens a reader for a request. An empty snap token reads the latest write, as
// Permify does; a token makes the read at least as fresh as the write that returned it.
func (h *Handler) reader(ctx context.Context, t *tenant, snap string) (store.Reader, error) {
	head, err := t.store.HeadRevision(ctx)
	if err != nil {
		return nil, err
	}
	if snap != "" {
		rev, err := zedtoken.Decode(snap)
		if err != nil {
			return nil, invalid("ERROR_CODE_INVALID_ARGUMENT", "snap_token is not one this server issued: "+err.Error())
		}
		if rev > head {
			return nil, store.ErrRevisionInFuture
		}
	}
	return t.store.Reader(ctx, head)
}

// schemaAt returns the schema a request runs with: schema_version names the revision
// a schema was written at; without it, the schema in force at r.
func (h *Handler) schemaAt(ctx context.Context, t *tenant, r store.Reader, version string) (*view, error) {
	src := r
	if version != "" {
		rev, err := zedtoken.Decode(version)
		if err != nil {
			return nil, notFound("ERROR_CODE_SCHEMA_NOT_FOUND", "schema_version "+quote(version)+" is not a version this server issued")
		}
		if src, err = t.store.Reader(ctx, rev); err != nil {
			return nil, err
		}
	}
	text, err := src.Schema(ctx)
	if err != nil {
		return nil, err
	}
	if text == "" {
		return nil, notFound("ERROR_CODE_SCHEMA_NOT_FOUND", "tenant "+quote(t.ID)+" has no schema; write one with schemas/write")
	}
	v, err := h.schemas.get(text)
	if err != nil {
		return nil, &apiError{codes.Internal, "ERROR_CODE_INTERNAL", "the stored schema does not compile"}
	}
	return v, nil
}

func (h *Handler) schemaWrite(ctx context.Context, t *tenant, body []byte) (any, error) {
	var req struct {
		Schema string `json:"schema"`
	}
	if err := decode(body, &req); err != nil {
		return nil, err
	}
	if strings.TrimSpace(req.Schema) == "" {
		return nil, invalid("ERROR_CODE_SCHEMA_PARSE", "schema is empty")
	}
	text, err := h.storedForm(t, req.Schema)
	if err != nil {
		return nil, err
	}
	if _, err := h.schemas.get(text); err != nil {
		return nil, &apiError{codes.Internal, "ERROR_CODE_INTERNAL", "the compiled schema does not round-trip"}
	}
	rev, err := t.store.WriteSchema(ctx, text, nil)
	if err != nil {
		return nil, err
	}
	return map[string]any{"schema_version": zedtoken.Encode(rev)}, nil
}

// sourceHeader starts the stored text of a schema kept in Permify's language.
const sourceHeader = "// latch: permify schema\n"

// storedForm compiles src and returns the text to store. A tenant the SpiceDB API also
// serves stores the .zed rendering (and so needs SpiceDB's names); any other tenant
// stores the Permify source itself, under Permify's naming rules.
func (h *Handler) storedForm(t *tenant, src string) (string, error) {
	shared := t.ID == DefaultTenant && h.cfg.SharedDefault
	s, err := perm.CompileWith(src, perm.Options{PermifyNames: !shared})
	if err != nil {
		return "", &apiError{codes.InvalidArgument, "ERROR_CODE_SCHEMA_COMPILE", err.Error()}
	}
	if !shared {
		return sourceHeader + src, nil
	}
	return schema.Format(s), nil
}

func (h *Handler) schemaRead(ctx context.Context, t *tenant, body []byte) (any, error) {
	var req struct {
		Metadata metadata `json:"metadata"`
	}
	if err := decode(body, &req); err != nil {
		return nil, err
	}
	r, err := h.reader(ctx, t, "")
	if err != nil {
		return nil, err
	}
	v, err := h.schemaAt(ctx, t, r, req.Metadata.SchemaVersion)
	if err != nil {
		return nil, err
	}
	return map[string]any{"schema": schemaJSON(v)}, nil
}
