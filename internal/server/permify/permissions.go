package permify

import (
	"context"
	"encoding/base64"
	"slices"

	"google.golang.org/grpc/codes"

	"github.com/latch-authz/latch/internal/engine"
	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/schema/ir"
)

const (
	allowed = "CHECK_RESULT_ALLOWED"
	denied  = "CHECK_RESULT_DENIED"
)

// checkContext is Permify's request context. Contextual tuples and attributes are
// refused rather than ignored, since ignoring them would give wrong answers.
type checkContext struct {
	Tuples     []tupleJSON     `json:"tuples"`
	Attributes []attributeJSON `json:"attributes"`
	Data       map[string]any  `json:"data"`
}

// caveatContext is the request context the engine evaluates rules with: rules read
// request values as `context.data.x`.
func (c checkContext) caveatContext() (map[string]any, error) {
	if len(c.Tuples) > 0 || len(c.Attributes) > 0 {
		return nil, &apiError{codes.Unimplemented, "ERROR_CODE_NOT_IMPLEMENTED", "contextual tuples and attributes are not supported; write them with data/write"}
	}
	if c.Data == nil {
		return nil, nil
	}
	return map[string]any{"context": map[string]any{"data": c.Data}}, nil
}

// result maps an engine answer to Permify's. A rule that lacks request data is
// CONDITIONAL in the engine; Permify answers such a check DENIED.
func result(m engine.Membership) string {
	if m == engine.HasPermission {
		return allowed
	}
	return denied
}

type checkBody struct {
	Metadata   metadata     `json:"metadata"`
	Entity     entityRef    `json:"entity"`
	Permission string       `json:"permission"`
	Subject    subjectRef   `json:"subject"`
	Context    checkContext `json:"context"`
}

func (c checkBody) request() (engine.CheckRequest, error) {
	ctx, err := c.Context.caveatContext()
	return engine.CheckRequest{
		Resource: rel.ObjectRef{Type: c.Entity.Type, ID: c.Entity.ID}, Permission: c.Permission,
		Subject: c.Subject.rel(), Context: ctx,
	}, err
}

func (h *Handler) check(ctx context.Context, t *tenant, body []byte) (any, error) {
	var req checkBody
	if err := decode(body, &req); err != nil {
		return nil, err
	}
	creq, err := req.request()
	if err != nil {
		return nil, err
	}
	r, v, err := h.readView(ctx, t, req.Metadata)
	if err != nil {
		return nil, err
	}
	res, err := t.engine.Check(ctx, v.s, r, creq)
	if err != nil {
		return nil, err
	}
	return map[string]any{"can": result(res.Membership), "metadata": map[string]any{"check_count": 0}}, nil
}

func (h *Handler) bulkCheck(ctx context.Context, t *tenant, body []byte) (any, error) {
	var req struct {
		Metadata metadata     `json:"metadata"`
		Items    []checkBody  `json:"items"`
		Context  checkContext `json:"context"`
	}
	if err := decode(body, &req); err != nil {
		return nil, err
	}
	if len(req.Items) > h.cfg.MaxBatch {
		return nil, invalid("ERROR_CODE_VALIDATION", "too many items in one bulk check")
	}
	creqs := make([]engine.CheckRequest, len(req.Items))
	for i, it := range req.Items {
		if it.Context.Data == nil {
			it.Context = req.Context
		}
		var err error
		if creqs[i], err = it.request(); err != nil {
			return nil, err
		}
	}
	r, v, err := h.readView(ctx, t, req.Metadata)
	if err != nil {
		return nil, err
	}
	results := make([]any, len(creqs))
	for i, br := range t.engine.CheckBulk(ctx, v.s, r, creqs) {
		if br.Err != nil {
			return nil, br.Err
		}
		results[i] = map[string]any{"can": result(br.Result.Membership), "metadata": map[string]any{"check_count": 0}}
	}
	return map[string]any{"results": results}, nil
}

// page sorts ids and returns the page after token (the last id of the previous page).
func page(ids []string, size int, token string) ([]string, string, error) {
	slices.Sort(ids)
	ids = slices.Compact(ids)
	if token != "" {
		raw, err := base64.RawURLEncoding.DecodeString(token)
		if err != nil {
			return nil, "", invalid("ERROR_CODE_INVALID_CONTINUOUS_TOKEN", "continuous_token is not one this server issued")
		}
		i, _ := slices.BinarySearch(ids, string(raw)+"\x00")
		ids = ids[i:]
	}
	if size <= 0 || len(ids) <= size {
		return ids, "", nil
	}
	ids = ids[:size]
	return ids, base64.RawURLEncoding.EncodeToString([]byte(ids[size-1])), nil
}

func (h *Handler) lookupEntity(ctx context.Context, t *tenant, body []byte) (any, error) {
	var req struct {
		Metadata        metadata     `json:"metadata"`
		EntityType      string       `json:"entity_type"`
		Permission      string       `json:"permission"`
		Subject         subjectRef   `json:"subject"`
		Context         checkContext `json:"context"`
		PageSize        int          `json:"page_size"`
		ContinuousToken string       `json:"continuous_token"`
	}
	if err := decode(body, &req); err != nil {
		return nil, err
	}
	cctx, err := req.Context.caveatContext()
	if err != nil {
		return nil, err
	}
	r, v, err := h.readView(ctx, t, req.Metadata)
	if err != nil {
		return nil, err
	}
	var ids []string
	lreq := engine.LookupResourcesRequest{ResourceType: req.EntityType, Permission: req.Permission, Subject: req.Subject.rel(), Context: cctx}
	err = t.engine.LookupResources(ctx, v.s, r, lreq, func(f engine.FoundResource) error {
		if f.Result.Membership == engine.HasPermission {
			ids = append(ids, f.ID)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	ids, next, err := page(ids, req.PageSize, req.ContinuousToken)
	if err != nil {
		return nil, err
	}
	return map[string]any{"entity_ids": nonNil(ids), "continuous_token": next}, nil
}

// lookupSubject lists concrete subject ids; a wildcard grant (a public attribute) is
// not expanded into every known subject.
func (h *Handler) lookupSubject(ctx context.Context, t *tenant, body []byte) (any, error) {
	var req struct {
		Metadata         metadata     `json:"metadata"`
		Entity           entityRef    `json:"entity"`
		Permission       string       `json:"permission"`
		SubjectReference subjectRef   `json:"subject_reference"`
		Context          checkContext `json:"context"`
		PageSize         int          `json:"page_size"`
		ContinuousToken  string       `json:"continuous_token"`
	}
	if err := decode(body, &req); err != nil {
		return nil, err
	}
	cctx, err := req.Context.caveatContext()
	if err != nil {
		return nil, err
	}
	r, v, err := h.readView(ctx, t, req.Metadata)
	if err != nil {
		return nil, err
	}
	sr := req.SubjectReference.rel()
	lreq := engine.LookupSubjectsRequest{
		Resource: rel.ObjectRef{Type: req.Entity.Type, ID: req.Entity.ID}, Permission: req.Permission,
		SubjectType: sr.Object.Type, SubjectRelation: sr.Relation, Context: cctx,
	}
	var ids []string
	err = t.engine.LookupSubjects(ctx, v.s, r, lreq, func(f engine.FoundSubject) error {
		if f.Result.Membership == engine.HasPermission && f.ID != rel.Wildcard {
			ids = append(ids, f.ID)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	ids, next, err := page(ids, req.PageSize, req.ContinuousToken)
	if err != nil {
		return nil, err
	}
	return map[string]any{"subject_ids": nonNil(ids), "continuous_token": next}, nil
}

// subjectPermission checks every permission (and, unless only_permission, every
// relation) of the entity for the subject.
func (h *Handler) subjectPermission(ctx context.Context, t *tenant, body []byte) (any, error) {
	var req checkBody
	if err := decode(body, &req); err != nil {
		return nil, err
	}
	base, err := req.request()
	if err != nil {
		return nil, err
	}
	r, v, err := h.readView(ctx, t, req.Metadata)
	if err != nil {
		return nil, err
	}
	def := v.s.Definition(req.Entity.Type)
	if def == nil {
		return nil, &ir.UnknownDefinitionError{Name: req.Entity.Type}
	}
	var names []string
	var creqs []engine.CheckRequest
	for _, rl := range def.Relations {
		if v.info.IsSynthetic(def.Name, rl.Name) || !rl.IsPermission() && req.Metadata.OnlyPermission {
			continue
		}
		c := base
		c.Permission = rl.Name
		names, creqs = append(names, rl.Name), append(creqs, c)
	}
	results := map[string]string{}
	for i, br := range t.engine.CheckBulk(ctx, v.s, r, creqs) {
		if br.Err != nil {
			return nil, br.Err
		}
		results[names[i]] = result(br.Result.Membership)
	}
	return map[string]any{"results": results}, nil
}

func (h *Handler) expand(ctx context.Context, t *tenant, body []byte) (any, error) {
	var req checkBody
	if err := decode(body, &req); err != nil {
		return nil, err
	}
	r, v, err := h.readView(ctx, t, req.Metadata)
	if err != nil {
		return nil, err
	}
	n, err := t.engine.Expand(ctx, v.s, r, rel.ObjectRef{Type: req.Entity.Type, ID: req.Entity.ID}, req.Permission)
	if err != nil {
		return nil, err
	}
	return map[string]any{"tree": expandJSON(n)}, nil
}

var expandOps = map[engine.ExpandOp]string{
	engine.ExpandUnion:        "OPERATION_UNION",
	engine.ExpandIntersection: "OPERATION_INTERSECTION", engine.ExpandExclusion: "OPERATION_EXCLUSION",
}

func expandJSON(n *engine.ExpandNode) map[string]any {
	out := map[string]any{"entity": entityRef{n.Object.Type, n.Object.ID}, "permission": n.Relation}
	if n.Op == engine.ExpandLeaf {
		subjects := make([]subjectRef, len(n.Subjects))
		for i, s := range n.Subjects {
			subjects[i] = subjectRef{s.Object.Type, s.Object.ID, s.Relation}
		}
		out["leaf"] = map[string]any{"subjects": subjects}
		return out
	}
	children := make([]any, len(n.Children))
	for i, c := range n.Children {
		children[i] = expandJSON(c)
	}
	out["expand"] = map[string]any{"operation": expandOps[n.Op], "children": children}
	return out
}
