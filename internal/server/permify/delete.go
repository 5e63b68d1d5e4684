package permify

import (
	"context"
	"slices"

	"github.com/latch-authz/latch/internal/rel"
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
	r, v, err := h.readView(ctx, t, metadata{SchemaVersion: req.Metadata.SchemaVersion})
	if err != nil {
		return nil, err
	}
	var b batch
	if !req.TupleFilter.empty() && req.TupleFilter.Entity.Type == "" {
		return nil, errNoEntityType
	}
	if !req.TupleFilter.empty() {
		rels, _, err := v.tuples(ctx, r, req.TupleFilter.store(), 0, "")
		if err != nil {
			return nil, err
		}
		for _, rl := range rels {
			b.add(store.Delete, rl)
		}
	}
	if req.AttributeFilter.Entity.Type != "" || len(req.AttributeFilter.Attributes) > 0 {
		if err := v.attributeDeletes(ctx, r, req.AttributeFilter, &b); err != nil {
			return nil, err
		}
	}
	if len(b.updates) == 0 {
		return map[string]any{"snap_token": zedtoken.Encode(r.Revision())}, nil
	}
	rev, err := t.store.Write(ctx, nil, b.updates, nil)
	if err != nil {
		return nil, err
	}
	return map[string]any{"snap_token": zedtoken.Encode(rev)}, nil
}

func (v *view) attributeDeletes(ctx context.Context, r store.Reader, f attributeFilter, b *batch) error {
	types := v.info.Entities
	if f.Entity.Type != "" {
		types = []string{f.Entity.Type}
	}
	for _, typ := range types {
		var rels []string
		for name := range v.info.Attributes[typ] {
			if len(f.Attributes) == 0 || slices.Contains(f.Attributes, name) {
				rels = append(rels, name)
			}
		}
		for _, c := range v.info.Calls[typ] {
			if slices.ContainsFunc(c.Args, func(a string) bool { return slices.Contains(rels, a) }) {
				rels = append(rels, c.Relation)
			}
		}
		for _, name := range rels {
			sf := store.Filter{ResourceType: typ, ResourceIDs: f.Entity.IDs, Relation: name}
			for it, err := range r.Query(ctx, sf, store.QueryOptions{}) {
				if err != nil {
					return err
				}
				if it.Relationship.Subject.Object.ID == rel.Wildcard {
					b.add(store.Delete, it.Relationship)
				}
			}
		}
	}
	return nil
}
