package permify

import (
	"context"

	"github.com/latch-authz/latch/internal/permdata"
	"github.com/latch-authz/latch/internal/server/zedtoken"
	"github.com/latch-authz/latch/internal/store"
)

// dataDelete deletes the tuples matching tuple_filter and the attributes matching
// attribute_filter in one atomic write. Deleting an attribute also deletes the rule
// call values built from it, so a rule over a deleted attribute is false until the
// entity's attributes are written again.
func (h *Handler) dataDelete(ctx context.Context, t *tenant, body []byte) (any, error) {
	var req struct {
		Metadata        metadata        `json:"metadata"`
		TupleFilter     tupleFilter     `json:"tuple_filter"`
		AttributeFilter attributeFilter `json:"attribute_filter"`
	}
	if err := decode(body, &req); err != nil {
		return nil, err
	}
	if err := firstError(req.TupleFilter.check("tuple_filter"), req.AttributeFilter.check("attribute_filter")); err != nil {
		return nil, err
	}
	r, v, err := h.readView(ctx, t, metadata{SchemaVersion: req.Metadata.SchemaVersion})
	if err != nil {
		return nil, err
	}
	var b permdata.Batch
	if !req.TupleFilter.empty() && req.TupleFilter.Entity.Type == "" {
		return nil, errNoEntityType
	}
	if !req.TupleFilter.empty() {
		rels, _, err := tuples(ctx, v, r, req.TupleFilter.store(), 0, "")
		if err != nil {
			return nil, err
		}
		for _, rl := range rels {
			b.Add(store.Delete, rl)
		}
	}
	if req.AttributeFilter.Entity.Type != "" || len(req.AttributeFilter.Attributes) > 0 {
		if err := v.AttributeDeletes(ctx, r, req.AttributeFilter.domain(), &b); err != nil {
			return nil, err
		}
	}
	if len(b.Updates) == 0 {
		return map[string]any{"snap_token": zedtoken.Encode(r.Revision())}, nil
	}
	rev, err := t.store.Write(ctx, nil, b.Updates, nil)
	if err != nil {
		return nil, err
	}
	return map[string]any{"snap_token": zedtoken.Encode(rev)}, nil
}
