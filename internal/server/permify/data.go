package permify

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/latch-authz/latch/internal/permdata"
	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/schema/ir"
	"github.com/latch-authz/latch/internal/server/zedtoken"
	"github.com/latch-authz/latch/internal/store"
)

// Wire shapes shared by the data and permission endpoints.

type entityRef struct {
	Type string `json:"type"`
	ID   string `json:"id"`
}

type subjectRef struct {
	Type     string `json:"type"`
	ID       string `json:"id"`
	Relation string `json:"relation,omitempty"`
}

type tupleJSON struct {
	Entity   entityRef  `json:"entity"`
	Relation string     `json:"relation"`
	Subject  subjectRef `json:"subject"`
}

type attributeJSON struct {
	Entity    entityRef       `json:"entity"`
	Attribute string          `json:"attribute"`
	Value     json.RawMessage `json:"value"`
}

func (s subjectRef) rel() rel.SubjectRef {
	r := s.Relation
	if r == "..." {
		r = ""
	}
	return rel.SubjectRef{Object: rel.ObjectRef{Type: s.Type, ID: s.ID}, Relation: r}
}

func tupleOf(r rel.Relationship) tupleJSON {
	return tupleJSON{
		Entity: entityRef{r.Resource.Type, r.Resource.ID}, Relation: r.Relation,
		Subject: subjectRef{r.Subject.Object.Type, r.Subject.Object.ID, r.Subject.Relation},
	}
}

// maxWriteAttempts bounds how often a data write is lowered again after a concurrent
// write changed an attribute value it read (permdata.ErrAttributeChanged). Writers
// of different attributes of one entity invalidate each other's reads, so with k of
// them an attempt succeeds about once in k: the bound is far past what that needs.
const maxWriteAttempts = 100

func (h *Handler) dataWrite(ctx context.Context, t *tenant, body []byte) (any, error) {
	var req struct {
		Metadata   metadata        `json:"metadata"`
		Tuples     []tupleJSON     `json:"tuples"`
		Attributes []attributeJSON `json:"attributes"`
	}
	if err := decode(body, &req); err != nil {
		return nil, err
	}
	if n := len(req.Tuples) + len(req.Attributes); n > h.cfg.MaxBatch {
		return nil, invalid("ERROR_CODE_MAX_DATA_PER_WRITE_EXCEEDED", fmt.Sprintf("%d tuples and attributes in one write; the maximum is %d", n, h.cfg.MaxBatch))
	}
	for attempt := 1; ; attempt++ {
		rev, err := h.writeOnce(ctx, t, req.Metadata.SchemaVersion, req.Tuples, req.Attributes)
		switch {
		case err == nil:
			return map[string]any{"snap_token": zedtoken.Encode(rev)}, nil
		case !errors.Is(err, permdata.ErrAttributeChanged):
			return nil, err
		case attempt == maxWriteAttempts:
			return nil, &apiError{codes.Aborted, "ERROR_CODE_SERIALIZATION", fmt.Sprintf("the attribute values this write depends on were changed by concurrent writes %d times in a row; nothing was written, retry the write", attempt)}
		}
		// The conflicting write may not be the published head yet (a durable store
		// publishes a revision once it is synced): wait a jittered, growing while
		// before lowering again, which also spreads contending writers apart.
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Duration(rand.Int64N(int64(time.Millisecond) << min(attempt, 6)))):
		}
	}
}

// writeOnce lowers the data at the head and writes it, provided the attribute values
// the lowering read are still the stored ones when the write commits: an attribute
// write completes the arguments of the rule calls that read it from the entity's
// other attributes, and a concurrent write of one of those must not be overwritten
// by the stale value read here.
func (h *Handler) writeOnce(ctx context.Context, t *tenant, schemaVersion string, tuples []tupleJSON, attributes []attributeJSON) (store.Revision, error) {
	r, v, err := h.readView(ctx, t, metadata{SchemaVersion: schemaVersion})
	if err != nil {
		return 0, err
	}
	b, err := lower(ctx, v, r, "", tuples, attributes)
	if err != nil {
		return 0, err
	}
	return t.store.Write(ctx, nil, b.Updates, b.Unchanged())
}

// lower turns tuples and attributes into the relationship updates a write of them
// makes at r: tuples checked against the schema, attributes lowered to the
// relationships that carry their values and the rule calls that read them. field
// prefixes the names of items in errors (`context.` for contextual data).
func lower(ctx context.Context, v *view, r store.Reader, field string, tuples []tupleJSON, attributes []attributeJSON) (permdata.Batch, error) {
	var b permdata.Batch
	for i, tp := range tuples {
		rl := tp.rel()
		if err := v.CheckTuple(rl); err != nil {
			return b, tupleError(fmt.Sprintf("%stuples[%d]", field, i), err)
		}
		b.Add(store.Touch, rl)
	}
	attrs := make([]permdata.Attribute, len(attributes))
	for i, a := range attributes {
		attrs[i] = permdata.Attribute{Entity: rel.ObjectRef{Type: a.Entity.Type, ID: a.Entity.ID}, Name: a.Attribute, Value: a.Value}
	}
	if err := v.AttributeUpdates(ctx, r, attrs, &b); err != nil {
		return b, attributeError(err)
	}
	return b, nil
}

func (tp tupleJSON) rel() rel.Relationship {
	return rel.Relationship{Resource: rel.ObjectRef{Type: tp.Entity.Type, ID: tp.Entity.ID}, Relation: tp.Relation, Subject: tp.Subject.rel()}
}

// tupleError gives a refused tuple Permify's error code: an unknown entity type is a
// schema definition not found and an unknown relation a relation definition not
// found, as Permify's data write reports them; anything else fails validation.
func tupleError(item string, err error) error {
	msg := item + ": " + err.Error()
	switch {
	case errors.As(err, new(*ir.UnknownDefinitionError)):
		return notFound("ERROR_CODE_SCHEMA_NOT_FOUND", msg)
	case errors.As(err, new(*ir.UnknownRelationError)):
		return notFound("ERROR_CODE_RELATION_DEFINITION_NOT_FOUND", msg)
	}
	return invalid("ERROR_CODE_VALIDATION", msg)
}

// attributeError gives a refused attribute Permify's error code.
func attributeError(err error) error {
	var ae *permdata.AttributeError
	if !errors.As(err, &ae) {
		return err
	}
	switch ae.Problem {
	case permdata.UnknownEntity:
		return notFound("ERROR_CODE_SCHEMA_NOT_FOUND", ae.Error())
	case permdata.UnknownAttribute:
		return notFound("ERROR_CODE_ATTRIBUTE_DEFINITION_NOT_FOUND", ae.Error())
	case permdata.ValueTypeMismatch:
		return invalid("ERROR_CODE_ATTRIBUTE_TYPE_MISMATCH", ae.Error())
	}
	return invalid("ERROR_CODE_VALIDATION", ae.Error())
}
