package permify

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"time"

	"github.com/latch-authz/latch/internal/engine"
	"github.com/latch-authz/latch/internal/permdata"
	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/store"
)

// checkContext is Permify's request context: contextual tuples and attributes, which
// count for this request alone as if written, and data that rules read.
type checkContext struct {
	Tuples     []tupleJSON     `json:"tuples"`
	Attributes []attributeJSON `json:"attributes"`
	Data       map[string]any  `json:"data"`
}

// caveatContext is the request context the engine evaluates rules with.
func (c checkContext) caveatContext() map[string]any { return permdata.RequestContext(c.Data) }

// on returns the reader and engine a request with this context evaluates with: r and
// eng, or, with contextual tuples or attributes, r overlaid with the relationships a
// write of them would make, and an engine that caches nothing (the answers are not
// those of r's revision).
func (c checkContext) on(ctx context.Context, eng *engine.Engine, v *view, r store.Reader) (store.Reader, *engine.Engine, error) {
	if len(c.Tuples) == 0 && len(c.Attributes) == 0 {
		return r, eng, nil
	}
	b, err := lower(ctx, v, r, "context.", c.Tuples, c.Attributes)
	if err != nil {
		return nil, nil, err
	}
	return store.WithUpdates(r, b.Updates, time.Now()), eng.Uncached(), nil
}

type checkBody struct {
	Metadata   metadata     `json:"metadata"`
	Entity     entityRef    `json:"entity"`
	Permission string       `json:"permission"`
	Subject    subjectRef   `json:"subject"`
	Context    checkContext `json:"context"`
}

// check checks the request's fields; prefix names where it sits in the body. An
// absent subject (expand has none) is left to the endpoint.
func (c checkBody) check(prefix string) error {
	var subject error
	if c.Subject != (subjectRef{}) {
		subject = c.Subject.check(prefix + "subject")
	}
	return firstError(c.Metadata.check(), c.Entity.check(prefix+"entity"), subject)
}

func (c checkBody) request() engine.CheckRequest {
	return engine.CheckRequest{
		Resource: rel.ObjectRef{Type: c.Entity.Type, ID: c.Entity.ID}, Permission: c.Permission,
		Subject: c.Subject.rel(), Context: c.Context.caveatContext(),
	}
}

// evalView is readView with the engine the request evaluates with: the tenant's, or,
// when schema_version names another schema than the one in force at the snapshot, one
// without cache or index, whose answers are those of a revision under its own schema.
func (h *Handler) evalView(ctx context.Context, t *tenant, m metadata) (store.Reader, *view, *engine.Engine, error) {
	r, v, err := h.readView(ctx, t, m)
	if err != nil || m.SchemaVersion == "" {
		return r, v, t.engine, err
	}
	current, err := r.Schema(ctx)
	if err != nil {
		return nil, nil, nil, err
	}
	if cur, err := h.schemas.Get(ctx, current); err == nil && cur == v {
		return r, v, t.engine, nil
	}
	return r, v, t.engine.Uncached(), nil
}

// checkSetup decodes a request about one entity and subject and returns what it is
// evaluated on: the reader at its snapshot with its contextual data, the schema there,
// and the engine.
func (h *Handler) checkSetup(ctx context.Context, t *tenant, body []byte) (checkBody, store.Reader, *view, *engine.Engine, error) {
	var req checkBody
	if err := decode(body, &req); err != nil {
		return req, nil, nil, nil, err
	}
	if err := req.check(""); err != nil {
		return req, nil, nil, nil, err
	}
	r, v, eng, err := h.evalView(ctx, t, req.Metadata)
	if err != nil {
		return req, nil, nil, nil, err
	}
	r, eng, err = req.Context.on(ctx, eng, v, r)
	return req, r, v, eng, err
}

func (h *Handler) check(ctx context.Context, t *tenant, body []byte) (any, error) {
	req, r, v, eng, err := h.checkSetup(ctx, t, body)
	if err != nil {
		return nil, err
	}
	var st engine.Stats
	res, err := eng.Check(engine.WithStats(ctx, &st), v.IR, r, req.request())
	if err != nil {
		return nil, err
	}
	return map[string]any{"can": permdata.Result(res.Membership), "metadata": map[string]any{"check_count": checkCount(&st)}}, nil
}

// checkCount is Permify's check_count: the subproblems a check evaluated or took from
// the cache.
func checkCount(st *engine.Stats) int64 { return st.Dispatched.Load() + st.Cached.Load() }

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
	if err := req.Metadata.check(); err != nil {
		return nil, err
	}
	for i, it := range req.Items {
		if err := it.check(fmt.Sprintf("items[%d].", i)); err != nil {
			return nil, err
		}
	}
	r, v, eng, err := h.evalView(ctx, t, req.Metadata)
	if err != nil {
		return nil, err
	}
	creqs := make([]engine.CheckRequest, len(req.Items))
	contextual := false
	for i := range req.Items {
		it := &req.Items[i]
		if it.Context.Data == nil && len(it.Context.Tuples) == 0 && len(it.Context.Attributes) == 0 {
			it.Context = req.Context
		}
		creqs[i] = it.request()
		contextual = contextual || len(it.Context.Tuples) > 0 || len(it.Context.Attributes) > 0
	}
	answers := make([]engine.BulkResult, len(creqs))
	counts := make([]int64, len(creqs))
	if contextual {
		// Each item sees its own contextual data: they are checked one by one.
		for i, it := range req.Items {
			ir, itEng, err := it.Context.on(ctx, eng, v, r)
			if err != nil {
				return nil, err
			}
			var st engine.Stats
			answers[i].Result, answers[i].Err = itEng.Check(engine.WithStats(ctx, &st), v.IR, ir, creqs[i])
			counts[i] = checkCount(&st)
		}
	} else {
		// Items are evaluated together and share their subproblems: each reports the
		// work of the whole evaluation.
		var st engine.Stats
		answers = eng.CheckBulk(engine.WithStats(ctx, &st), v.IR, r, creqs)
		for i := range counts {
			counts[i] = checkCount(&st)
		}
	}
	results := make([]any, len(creqs))
	for i, br := range answers {
		if br.Err != nil {
			return nil, br.Err
		}
		results[i] = map[string]any{"can": permdata.Result(br.Result.Membership), "metadata": map[string]any{"check_count": counts[i]}}
	}
	return map[string]any{"results": results}, nil
}

// lookupPage is what both lookups' requests carry besides the query itself.
type lookupPage struct {
	Metadata        metadata     `json:"metadata"`
	Context         checkContext `json:"context"`
	PageSize        int          `json:"page_size"`
	ContinuousToken string       `json:"continuous_token"`
}

// lookupOn returns the reader, schema and engine a lookup runs with: the request's
// snapshot and schema, overlaid with its contextual data.
func (h *Handler) lookupOn(ctx context.Context, t *tenant, req lookupPage) (store.Reader, *view, *engine.Engine, error) {
	r, v, eng, err := h.evalView(ctx, t, req.Metadata)
	if err != nil {
		return nil, nil, nil, err
	}
	r, eng, err = req.Context.on(ctx, eng, v, r)
	return r, v, eng, err
}

// entityQuery is a lookup-entity or lookup-entity-stream request (Permify's
// PermissionLookupEntityRequest serves both).
type entityQuery struct {
	lookupPage
	EntityType string     `json:"entity_type"`
	Permission string     `json:"permission"`
	Subject    subjectRef `json:"subject"`
}

// eachEntity passes yield, in id order, the ids of the entities req finds after its
// continuous_token, as the engine proves them, each with the token that resumes after
// it. The engine's lookup is ordered and starts after the token's id, so a resumed
// lookup does not redo the checks of the ids already given.
func (h *Handler) eachEntity(ctx context.Context, t *tenant, req entityQuery, yield func(id, token string) error) error {
	if err := firstError(req.lookupPage.check(), req.Subject.check("subject")); err != nil {
		return err
	}
	q := queryHash("lookup-entity", req.EntityType, req.Permission, req.Subject, req.Context)
	after, err := afterToken(q, req.ContinuousToken)
	if err != nil {
		return err
	}
	r, v, eng, err := h.lookupOn(ctx, t, req.lookupPage)
	if err != nil {
		return err
	}
	lreq := engine.LookupResourcesRequest{
		ResourceType: req.EntityType, Permission: req.Permission, Subject: req.Subject.rel(),
		Context: req.Context.caveatContext(), Ordered: true, After: after,
	}
	return permdata.EachEntity(ctx, eng, v, r, lreq, func(id string) error { return yield(id, continuousToken(q, id)) })
}

// errPageFull stops a lookup once its page is complete.
var errPageFull = errors.New("page full")

// lookupEntity answers one page of ids. The lookup stops at the first id past the
// page, which shows that the page's last token leads somewhere.
func (h *Handler) lookupEntity(ctx context.Context, t *tenant, body []byte) (any, error) {
	var req entityQuery
	if err := decode(body, &req); err != nil {
		return nil, err
	}
	var ids []string
	var last, next string
	err := h.eachEntity(ctx, t, req, func(id, token string) error {
		if req.PageSize > 0 && len(ids) == req.PageSize {
			next = last
			return errPageFull
		}
		ids, last = append(ids, id), token
		return nil
	})
	if err != nil && !errors.Is(err, errPageFull) {
		return nil, err
	}
	return map[string]any{"entity_ids": nonNil(ids), "continuous_token": next}, nil
}

// streamPageSize is how many entities lookup-entity-stream sends when the request
// sets no page_size, as Permify's server does.
const streamPageSize = 1000

// lookupEntityStream sends each entity as the engine proves it, with the token that
// resumes after it, up to page_size of them. Permify leaves the last candidate's token
// empty; this stream sends each result as soon as it is proven, before it is known to
// be the last, so a stream shorter than page_size is how a client knows it has all.
func (h *Handler) lookupEntityStream(ctx context.Context, t *tenant, body []byte, send func(any) error) error {
	var req entityQuery
	if err := decode(body, &req); err != nil {
		return err
	}
	size := req.PageSize
	if size <= 0 {
		size = streamPageSize
	}
	sent := 0
	err := h.eachEntity(ctx, t, req, func(id, token string) error {
		if sent == size {
			return errPageFull
		}
		sent++
		return send(map[string]string{"entity_id": id, "continuous_token": token})
	})
	if errors.Is(err, errPageFull) {
		return nil
	}
	return err
}

// lookupSubject lists the subject ids with the permission, a wildcard grant expanded
// into the subjects the tenant's relationships name (permdata.LookupSubjectsPage), one
// page in id order after the continuous_token.
func (h *Handler) lookupSubject(ctx context.Context, t *tenant, body []byte) (any, error) {
	var req struct {
		lookupPage
		Entity           entityRef  `json:"entity"`
		Permission       string     `json:"permission"`
		SubjectReference subjectRef `json:"subject_reference"`
	}
	if err := decode(body, &req); err != nil {
		return nil, err
	}
	if err := firstError(req.lookupPage.check(), req.Entity.check("entity")); err != nil {
		return nil, err
	}
	q := queryHash("lookup-subject", req.Entity, req.Permission, req.SubjectReference, req.Context)
	after, err := afterToken(q, req.ContinuousToken)
	if err != nil {
		return nil, err
	}
	r, v, eng, err := h.lookupOn(ctx, t, req.lookupPage)
	if err != nil {
		return nil, err
	}
	sr := req.SubjectReference.rel()
	ids, more, err := permdata.LookupSubjectsPage(ctx, eng, v, r, engine.LookupSubjectsRequest{
		Resource: rel.ObjectRef{Type: req.Entity.Type, ID: req.Entity.ID}, Permission: req.Permission,
		SubjectType: sr.Object.Type, SubjectRelation: sr.Relation, Context: req.Context.caveatContext(),
	}, after, max(req.PageSize, 0))
	if err != nil {
		return nil, err
	}
	next := ""
	if more {
		next = continuousToken(q, ids[len(ids)-1])
	}
	return map[string]any{"subject_ids": nonNil(ids), "continuous_token": next}, nil
}

// A continuous_token names the query it continues, as a hash, and the last id given;
// a token from another query is refused rather than silently paging that one.

// queryHash is the hash of a lookup's query: its endpoint and the fields that decide
// its answer (not the snapshot or page size; a later snapshot continues by id).
func queryHash(endpoint string, fields ...any) [8]byte {
	hash := fnv.New64a()
	hash.Write([]byte(endpoint))
	_ = json.NewEncoder(hash).Encode(fields)
	var q [8]byte
	binary.BigEndian.PutUint64(q[:], hash.Sum64())
	return q
}

func continuousToken(q [8]byte, last string) string {
	return base64.RawURLEncoding.EncodeToString(append(q[:], last...))
}

// afterToken returns the id a continuous_token for query q resumes after ("" without
// a token).
func afterToken(q [8]byte, token string) (string, error) {
	if token == "" {
		return "", nil
	}
	raw, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil || len(raw) <= len(q) || [8]byte(raw[:len(q)]) != q {
		return "", invalid("ERROR_CODE_INVALID_CONTINUOUS_TOKEN", "continuous_token was not issued for this query; send the token the previous page of the same lookup returned")
	}
	return string(raw[len(q):]), nil
}

// subjectPermission checks every permission (and, unless only_permission, every
// relation) of the entity for the subject.
func (h *Handler) subjectPermission(ctx context.Context, t *tenant, body []byte) (any, error) {
	req, r, v, eng, err := h.checkSetup(ctx, t, body)
	if err != nil {
		return nil, err
	}
	base := req.request()
	def := v.IR.Definition(req.Entity.Type)
	if def == nil {
		return nil, v.IR.UnknownDefinition(req.Entity.Type)
	}
	var names []string
	var creqs []engine.CheckRequest
	for _, rl := range def.Relations {
		if v.Info.IsSynthetic(def.Name, rl.Name) || !rl.IsPermission() && req.Metadata.OnlyPermission {
			continue
		}
		c := base
		c.Permission = rl.Name
		names, creqs = append(names, rl.Name), append(creqs, c)
	}
	results := map[string]string{}
	for i, br := range eng.CheckBulk(ctx, v.IR, r, creqs) {
		if br.Err != nil {
			return nil, br.Err
		}
		results[names[i]] = permdata.Result(br.Result.Membership)
	}
	return map[string]any{"results": results}, nil
}

func (h *Handler) expand(ctx context.Context, t *tenant, body []byte) (any, error) {
	req, r, v, eng, err := h.checkSetup(ctx, t, body)
	if err != nil {
		return nil, err
	}
	n, err := eng.Expand(ctx, v.IR, r, rel.ObjectRef{Type: req.Entity.Type, ID: req.Entity.ID}, req.Permission)
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
