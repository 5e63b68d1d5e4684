package authzen

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"

	"github.com/latch-authz/latch/internal/engine"
	"github.com/latch-authz/latch/internal/rel"
)

// Page sizes of the search APIs: a request's page.limit, up to maxPageSize; without
// one, defaultPageSize.
const (
	defaultPageSize = 100
	maxPageSize     = 1000
)

// searchRequest is a subject, resource or action search.
type searchRequest struct {
	tuple
	Page *struct {
		Token string `json:"token"`
		Limit *int64 `json:"limit"`
	} `json:"page,omitempty"`
}

// page is where a search request starts and how many results it returns.
type page struct {
	query [8]byte // the hash of the request without its page
	after string  // the position after the last result of the page before
	limit int
}

// pageOf reads req's page: a token must come from a search of the same request.
func pageOf(kind string, req searchRequest) (page, error) {
	q := req
	q.Page = nil
	raw, _ := json.Marshal(q) // maps marshal sorted: equal requests hash equal
	h := fnv.New64a()
	_, _ = h.Write([]byte(kind))
	_, _ = h.Write(raw)
	p := page{limit: defaultPageSize}
	binary.BigEndian.PutUint64(p.query[:], h.Sum64())
	if req.Page == nil {
		return p, nil
	}
	if l := req.Page.Limit; l != nil {
		if *l < 0 || *l > maxPageSize {
			return p, badRequest("page.limit: %d is not between 0 and %d", *l, maxPageSize)
		}
		if *l > 0 {
			p.limit = int(*l)
		}
	}
	if req.Page.Token == "" {
		return p, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(req.Page.Token)
	if err != nil || len(b) < len(p.query) || [8]byte(b[:8]) != p.query {
		return p, badRequest("page.token: not a token of this search (a token continues the search that returned it, with the same subject, resource, action and context)")
	}
	p.after = string(b[8:])
	return p, nil
}

// token is the page token of a page that ended at after.
func (p page) token(after string) string {
	return base64.RawURLEncoding.EncodeToString(append(p.query[:], after...))
}

// results collects a page: add takes results until the page is full, then, given one
// more, reports that another page follows (errPageFull ends the lookup).
type results[T any] struct {
	p    page
	out  []T
	last string // the position of the last result taken
	more bool
	// total is the number of results of the whole search when it is known (the
	// search computed its whole answer), else 0.
	total int
}

var errPageFull = errors.New("page full")

func (r *results[T]) add(v T, pos string) error {
	if len(r.out) == r.p.limit {
		r.more = true
		return errPageFull
	}
	r.out = append(r.out, v)
	r.last = pos
	return nil
}

// response renders the page: its results and, when more follow, the token of the next.
func (r *results[T]) response(err error) (any, error) {
	if err != nil && !errors.Is(err, errPageFull) {
		return nil, err
	}
	next := ""
	if r.more {
		next = r.p.token(r.last)
	}
	out := r.out
	if out == nil {
		out = []T{}
	}
	pg := map[string]any{"next_token": next, "count": len(out)}
	if r.total > 0 {
		pg["total"] = r.total
	}
	return map[string]any{"results": out, "page": pg}, nil
}

// search is a decoded search request.
type search struct {
	subj rel.SubjectRef
	res  rel.ObjectRef
	perm string // the action's permission; "" for an action search, which names none
	cc   map[string]any
	p    page
}

// decodeSearch reads a search of kind ("subject", "resource" or "action"): the
// searched entity comes without its id, the others with theirs; an action search has
// no action.
func (h *Handler) decodeSearch(kind string, d Data, body []byte) (search, error) {
	var req searchRequest
	if err := decode(body, &req); err != nil {
		return search{}, err
	}
	var q search
	var err error
	if q.p, err = pageOf(kind, req); err != nil {
		return q, err
	}
	if q.subj, err = d.subject(req.Subject, "subject", kind != "subject"); err != nil {
		return q, err
	}
	if q.res, err = d.resource(req.Resource, "resource", kind != "resource"); err != nil {
		return q, err
	}
	if kind != "action" {
		if q.perm, err = permission(req.Action, "action"); err != nil {
			return q, err
		}
	}
	q.cc, err = req.caveatContext("")
	return q, err
}

// searchSubject lists the subjects of the subject's type that may perform the action
// on the resource: LookupSubjects, in id order, paged by the last id. Subjects whose
// access depends on caveat context the request did not send are left out; a wildcard
// (every subject of the type) is the result {type, id: "*"}, with the subjects it
// does not cover in properties.excluded.
func (h *Handler) searchSubject(ctx context.Context, d Data, body []byte) (any, error) {
	q, err := h.decodeSearch("subject", d, body)
	if err != nil {
		return nil, err
	}
	subj, p := q.subj, q.p
	if p.after == afterWildcards {
		return (&results[entity]{p: p}).response(nil)
	}
	lreq := engine.LookupSubjectsRequest{
		Resource: q.res, Permission: q.perm, SubjectType: subj.Object.Type, SubjectRelation: subj.Relation,
		Context: q.cc, After: p.after,
	}
	pg := &results[entity]{p: p}
	if d.ListSubjects != nil {
		ids, err := d.ListSubjects(ctx, lreq)
		pg.total = len(ids)
		return pg.response(pageList(ids, p.after, func(id string) error {
			e, pos := entity{Type: subj.Object.Type, ID: id}, id
			if id == rel.Wildcard {
				pos = afterWildcards
			} else if subj.Relation != "" {
				e.ID += "#" + subj.Relation
			}
			return pg.add(e, pos)
		}, err))
	}
	err = d.Engine.LookupSubjects(ctx, d.Schema, d.Reader, lreq, func(f engine.FoundSubject) error {
		if ok, err := d.granted(f.Result); !ok || err != nil {
			return err
		}
		e := entity{Type: subj.Object.Type, ID: f.ID}
		pos := f.ID
		if f.ID == rel.Wildcard {
			pos = afterWildcards
			if ex := excluded(f.Excluded); len(ex) > 0 {
				e.Properties = map[string]any{"excluded": ex}
			}
		}
		if subj.Relation != "" && f.ID != rel.Wildcard {
			e.ID += "#" + subj.Relation
		}
		return pg.add(e, pos)
	})
	return pg.response(err)
}

// afterWildcards is the position past a subject search's wildcard, which follows every
// concrete subject.
const afterWildcards = "\x7f"

// excluded lists the ids a wildcard certainly does not cover; one excluded only under
// a caveat is not listed, so the list never hides a subject that has access.
func excluded(fs []engine.FoundSubject) []string {
	var ids []string
	for _, f := range fs {
		if f.Result.Membership == engine.HasPermission {
			ids = append(ids, f.ID)
		}
	}
	return ids
}

// searchResource lists the resources of the resource's type on which the subject may
// perform the action: LookupResources in id order, paged by the last id; resources
// whose access depends on caveat context the request did not send are left out.
func (h *Handler) searchResource(ctx context.Context, d Data, body []byte) (any, error) {
	q, err := h.decodeSearch("resource", d, body)
	if err != nil {
		return nil, err
	}
	res := q.res
	lreq := engine.LookupResourcesRequest{
		ResourceType: res.Type, Permission: q.perm, Subject: q.subj, Context: q.cc, Ordered: true, After: q.p.after,
	}
	pg := &results[entity]{p: q.p}
	if d.ListResources != nil {
		ids, err := d.ListResources(ctx, lreq)
		pg.total = len(ids)
		return pg.response(pageList(ids, q.p.after, func(id string) error {
			return pg.add(entity{Type: res.Type, ID: id}, id)
		}, err))
	}
	err = d.Engine.LookupResources(ctx, d.Schema, d.Reader, lreq, func(f engine.FoundResource) error {
		if ok, err := d.granted(f.Result); !ok || err != nil {
			return err
		}
		return pg.add(entity{Type: res.Type, ID: f.ID}, f.ID)
	})
	return pg.response(err)
}

// searchAction lists the permissions of the resource's definition that the subject
// has on the resource, in the schema's order: one bulk check of them all, paged by
// position.
func (h *Handler) searchAction(ctx context.Context, d Data, body []byte) (any, error) {
	q, err := h.decodeSearch("action", d, body)
	if err != nil {
		return nil, err
	}
	res, p := q.res, q.p
	skip := 0
	if p.after != "" {
		if skip, err = strconv.Atoi(p.after); err != nil || skip < 0 {
			return nil, badRequest("page.token: not a token of this search")
		}
	}
	def := d.Schema.Definition(res.Type)
	if def == nil {
		return nil, d.Schema.UnknownDefinition(res.Type)
	}
	var checks []engine.CheckRequest
	for _, r := range def.Relations {
		if r.IsPermission() {
			checks = append(checks, engine.CheckRequest{Resource: res, Permission: r.Name, Subject: q.subj, Context: q.cc})
		}
	}
	pg := &results[action]{p: p}
	granted := 0
	for i, r := range d.Engine.CheckBulk(ctx, d.Schema, d.Reader, checks) {
		if r.Err != nil {
			return nil, r.Err
		}
		if ok, err := d.granted(r.Result); err != nil {
			return nil, err
		} else if !ok {
			continue
		}
		granted++
		if granted > skip && !pg.more {
			_ = pg.add(action{Name: checks[i].Permission}, strconv.Itoa(granted))
		}
	}
	pg.total = granted
	return pg.response(nil)
}

// pageList feeds add the ids of a whole list after the position after, in the order
// the engine's lookups page in (ascending ids, a wildcard last), until add stops it.
// err is the list's own error, returned as is.
func pageList(ids []string, after string, add func(string) error, err error) error {
	if err != nil {
		return err
	}
	pos := func(id string) string {
		if id == rel.Wildcard {
			return afterWildcards
		}
		return id
	}
	ids = slices.Clone(ids)
	slices.SortFunc(ids, func(a, b string) int { return strings.Compare(pos(a), pos(b)) })
	for _, id := range slices.Compact(ids) {
		if pos(id) <= after {
			continue
		}
		if err := add(id); err != nil {
			return err
		}
	}
	return nil
}
