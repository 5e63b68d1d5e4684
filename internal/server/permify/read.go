package permify

import (
	"context"
	"encoding/base64"

	"github.com/latch-authz/latch/internal/permdata"
	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/store"
)

// The read endpoints: tuples and attributes, with Permify's filters and paging.

type tupleFilter struct {
	Entity struct {
		Type string   `json:"type"`
		IDs  []string `json:"ids"`
	} `json:"entity"`
	Relation string `json:"relation"`
	Subject  struct {
		Type     string   `json:"type"`
		IDs      []string `json:"ids"`
		Relation string   `json:"relation"`
	} `json:"subject"`
}

func (f tupleFilter) store() store.Filter {
	out := store.Filter{ResourceType: f.Entity.Type, ResourceIDs: f.Entity.IDs, Relation: f.Relation}
	if f.Subject.Type != "" || len(f.Subject.IDs) > 0 || f.Subject.Relation != "" {
		out.Subject = &store.SubjectFilter{Type: f.Subject.Type, IDs: f.Subject.IDs}
		if f.Subject.Relation != "" {
			out.Subject.Relation, out.Subject.RelationSet = f.Subject.Relation, true
			if f.Subject.Relation == "..." {
				out.Subject.Relation = ""
			}
		}
	}
	return out
}

func (f tupleFilter) empty() bool {
	return f.Entity.Type == "" && len(f.Entity.IDs) == 0 && f.Relation == "" && f.Subject.Type == "" && len(f.Subject.IDs) == 0
}

type attributeFilter struct {
	Entity struct {
		Type string   `json:"type"`
		IDs  []string `json:"ids"`
	} `json:"entity"`
	Attributes []string `json:"attributes"`
}

func (f attributeFilter) domain() permdata.AttributeFilter {
	return permdata.AttributeFilter{Type: f.Entity.Type, IDs: f.Entity.IDs, Attributes: f.Attributes}
}

func decodeToken(tok string) (store.Cursor, error) {
	raw, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil {
		return "", invalid("ERROR_CODE_INVALID_CONTINUOUS_TOKEN", "continuous_token is not one this server issued")
	}
	return store.Cursor(raw), nil
}

// page reads tuples matching f, skipping synthetic relations, up to size (0: all).
func tuples(ctx context.Context, v *view, r store.Reader, f store.Filter, size int, token string) ([]rel.Relationship, string, error) {
	opts := store.QueryOptions{}
	if token != "" {
		c, err := decodeToken(token)
		if err != nil {
			return nil, "", err
		}
		opts.After = c
	}
	var out []rel.Relationship
	for it, err := range r.Query(ctx, f, opts) {
		if err != nil {
			return nil, "", err
		}
		rl := it.Relationship
		if v.Info.IsSynthetic(rl.Resource.Type, rl.Relation) {
			continue
		}
		out = append(out, rl)
		if size > 0 && len(out) == size {
			return out, base64.RawURLEncoding.EncodeToString([]byte(it.Cursor())), nil
		}
	}
	return out, "", nil
}

func (h *Handler) relationshipsRead(ctx context.Context, t *tenant, body []byte) (any, error) {
	var req struct {
		Metadata        metadata    `json:"metadata"`
		Filter          tupleFilter `json:"filter"`
		PageSize        int         `json:"page_size"`
		ContinuousToken string      `json:"continuous_token"`
	}
	if err := decode(body, &req); err != nil {
		return nil, err
	}
	if req.Filter.Entity.Type == "" {
		return nil, errNoEntityType
	}
	if err := firstError(req.Metadata.check(), req.Filter.check("filter"), checkPageSize(req.PageSize)); err != nil {
		return nil, err
	}
	r, v, err := h.readView(ctx, t, req.Metadata)
	if err != nil {
		return nil, err
	}
	rels, next, err := tuples(ctx, v, r, req.Filter.store(), req.PageSize, req.ContinuousToken)
	if err != nil {
		return nil, err
	}
	out := make([]tupleJSON, len(rels))
	for i, rl := range rels {
		out[i] = tupleOf(rl)
	}
	return map[string]any{"tuples": out, "continuous_token": next}, nil
}

// errNoEntityType refuses tuple filters without an entity type, as Permify does: a
// read or delete of every tuple of every type is rarely what was meant.
var errNoEntityType = invalid("ERROR_CODE_VALIDATION", "the tuple filter needs an entity type (filter.entity.type)")

func (h *Handler) readView(ctx context.Context, t *tenant, m metadata) (store.Reader, *view, error) {
	r, err := h.reader(ctx, t, m.SnapToken)
	if err != nil {
		return nil, nil, err
	}
	v, err := h.schemaAt(ctx, t, r, m.SchemaVersion)
	return r, v, err
}

// attributesJSON reads the attribute values matching f in Permify's wire form.
func attributesJSON(ctx context.Context, v *view, r store.Reader, f attributeFilter) ([]map[string]any, error) {
	vals, err := v.Attributes(ctx, r, f.domain())
	if err != nil {
		return nil, err
	}
	var out []map[string]any
	for _, a := range vals {
		out = append(out, map[string]any{
			"entity": entityRef{a.Entity.Type, a.Entity.ID}, "attribute": a.Attribute,
			"value": permdata.ValueJSON(a.Value, a.Type),
		})
	}
	return out, nil
}

func (h *Handler) attributesRead(ctx context.Context, t *tenant, body []byte) (any, error) {
	var req struct {
		Metadata metadata        `json:"metadata"`
		Filter   attributeFilter `json:"filter"`
	}
	if err := decode(body, &req); err != nil {
		return nil, err
	}
	if err := firstError(req.Metadata.check(), req.Filter.check("filter")); err != nil {
		return nil, err
	}
	r, v, err := h.readView(ctx, t, req.Metadata)
	if err != nil {
		return nil, err
	}
	attrs, err := attributesJSON(ctx, v, r, req.Filter)
	if err != nil {
		return nil, err
	}
	return map[string]any{"attributes": nonNil(attrs), "continuous_token": ""}, nil
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// dataRead answers tuples and attributes in one call; page_size and
// continuous_token page the tuples, as relationships/read does.
func (h *Handler) dataRead(ctx context.Context, t *tenant, body []byte) (any, error) {
	var req struct {
		Metadata        metadata        `json:"metadata"`
		Filter          tupleFilter     `json:"filter"`
		AttributeFilter attributeFilter `json:"attribute_filter"`
		PageSize        int             `json:"page_size"`
		ContinuousToken string          `json:"continuous_token"`
	}
	if err := decode(body, &req); err != nil {
		return nil, err
	}
	if err := firstError(req.Metadata.check(), req.Filter.check("filter"), req.AttributeFilter.check("attribute_filter"), checkPageSize(req.PageSize)); err != nil {
		return nil, err
	}
	r, v, err := h.readView(ctx, t, req.Metadata)
	if err != nil {
		return nil, err
	}
	rels, next, err := tuples(ctx, v, r, req.Filter.store(), req.PageSize, req.ContinuousToken)
	if err != nil {
		return nil, err
	}
	tuples := make([]tupleJSON, len(rels))
	for i, rl := range rels {
		tuples[i] = tupleOf(rl)
	}
	attrs, err := attributesJSON(ctx, v, r, req.AttributeFilter)
	if err != nil {
		return nil, err
	}
	return map[string]any{"tuples": tuples, "attributes": nonNil(attrs), "continuous_token": next}, nil
}
