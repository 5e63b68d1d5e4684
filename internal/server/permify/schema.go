package permify

import (
	"context"
	"strings"

	"google.golang.org/grpc/codes"

	"github.com/latch-authz/latch/internal/permdata"
	"github.com/latch-authz/latch/internal/schema"
	"github.com/latch-authz/latch/internal/schema/ir"
	"github.com/latch-authz/latch/internal/schema/perm"
	"github.com/latch-authz/latch/internal/server/zedtoken"
	"github.com/latch-authz/latch/internal/store"
)

// view is a compiled schema with its Permify reading.
type view = permdata.Schema

// maxCachedSchemas bounds the cache; tenants rarely have more than a few live versions.
const maxCachedSchemas = 64

func newSchemaCache() *schema.Cache[*view] { return schema.NewCache(maxCachedSchemas, compileStored) }

// compileStored compiles a stored schema text: Permify source under sourceHeader, the
// .zed rendering otherwise (see storedForm).
func compileStored(ctx context.Context, text string) (*view, error) {
	var s *ir.Schema
	var err error
	if src, ok := strings.CutPrefix(text, sourceHeader); ok {
		s, err = perm.CompileContext(ctx, src, perm.Options{PermifyNames: true})
	} else {
		s, err = schema.CompileContext(ctx, text)
	}
	if err != nil {
		return nil, err
	}
	return permdata.NewSchema(s), nil
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
	v, err := h.schemas.Get(ctx, text)
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
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
	text, err := h.storedForm(ctx, t, req.Schema)
	if err != nil {
		return nil, err
	}
	if _, err := h.schemas.Get(ctx, text); ctx.Err() != nil {
		return nil, ctx.Err()
	} else if err != nil {
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
func (h *Handler) storedForm(ctx context.Context, t *tenant, src string) (string, error) {
	shared := t.ID == DefaultTenant && h.cfg.SharedDefault
	s, err := perm.CompileContext(ctx, src, perm.Options{PermifyNames: !shared})
	if ctx.Err() != nil {
		return "", ctx.Err()
	}
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
	_, v, err := h.readView(ctx, t, metadata{SchemaVersion: req.Metadata.SchemaVersion})
	if err != nil {
		return nil, err
	}
	return map[string]any{"schema": schemaJSON(v)}, nil
}
