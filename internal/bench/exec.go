package bench

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"strconv"
	"sync/atomic"
	"unsafe"

	v1 "github.com/authzed/authzed-go/proto/authzed/api/v1"
	"google.golang.org/grpc"

	"github.com/latch-authz/latch/internal/bench/dist"
)

// maxInternedIDs bounds the id strings built ahead of a run per template; larger id
// spaces format each id as it is drawn.
const maxInternedIDs = 4 << 20

// idTable is a template's ids, built once and shared by every worker so that drawing
// an id allocates nothing. They are kept end to end in one array, each id a string
// over its part of it, so that the garbage collector, which would otherwise mark a
// string for each of millions of ids at every collection, has nothing in the table
// to scan.
type idTable struct {
	prefix, suffix string
	text           []byte   // the ids, end to end; never changed once built
	ends           []uint32 // where each id ends in text; nil when the space is too large to intern
}

func newIDTable(t Template, n int) *idTable {
	tbl := &idTable{prefix: t.Prefix, suffix: t.Suffix}
	if t.Generator == "" || n > maxInternedIDs {
		return tbl
	}
	tbl.ends = make([]uint32, n)
	for i := range tbl.ends {
		tbl.text = append(tbl.text, t.Prefix...)
		tbl.text = strconv.AppendInt(tbl.text, int64(i), 10)
		tbl.text = append(tbl.text, t.Suffix...)
		tbl.ends[i] = uint32(len(tbl.text))
	}
	return tbl
}

func (t *idTable) get(i int) string {
	if i < len(t.ends) {
		start := uint32(0)
		if i > 0 {
			start = t.ends[i-1]
		}
		return unsafe.String(&t.text[start], int(t.ends[i]-start))
	}
	return t.prefix + strconv.Itoa(i) + t.suffix
}

// plan is what every worker of a run shares: the workload, its id tables and the
// newest write token (for at_least_as_fresh).
type plan struct {
	w       *Workload
	tables  map[string]*idTable // by Template.String()
	weights []int               // cumulative step weights
	latest  atomic.Pointer[v1.Consistency]
}

func newPlan(w *Workload) *plan {
	p := &plan{w: w, tables: map[string]*idTable{}}
	total := 0
	for _, s := range w.Steps {
		total += s.Weight
		p.weights = append(p.weights, total)
		for _, t := range []Template{s.Resource, s.Subject} {
			if _, ok := p.tables[t.String()]; !ok && t.Type != "" {
				p.tables[t.String()] = newIDTable(t, w.Generators[t.Generator].Spec.N)
			}
		}
	}
	return p
}

var (
	minimizeLatency = &v1.Consistency{Requirement: &v1.Consistency_MinimizeLatency{MinimizeLatency: true}}
	fullyConsistent = &v1.Consistency{Requirement: &v1.Consistency_FullyConsistent{FullyConsistent: true}}
)

func (p *plan) consistency(level string) *v1.Consistency {
	switch level {
	case "fully_consistent":
		return fullyConsistent
	case "at_least_as_fresh":
		if c := p.latest.Load(); c != nil {
			return c
		}
		return fullyConsistent // nothing written yet: as fresh as anything
	}
	return minimizeLatency
}

// drawer draws one template's ids for one worker.
type drawer struct {
	tbl   *idTable
	smp   dist.Sampler // nil for a literal id
	rnd   *rand.Rand
	reuse float64
	last  int
	// pair, when set, is the drawer of the step's resource, whose draw this one repeats.
	pair *drawer
}

func (d *drawer) id() string {
	if d.pair != nil {
		return d.tbl.get(d.pair.last)
	}
	if d.smp == nil {
		return d.tbl.prefix
	}
	if d.reuse == 0 || d.rnd.Float64() >= d.reuse {
		d.last = d.smp.Next()
	}
	return d.tbl.get(d.last)
}

// grpcWorker runs steps over one connection, reusing one request message per step: a
// unary call has marshalled its request before it returns, so the next call may
// overwrite the fields.
type grpcWorker struct {
	p     *plan
	rnd   *rand.Rand
	calls []func(context.Context) error
}

func newGRPCWorker(p *plan, conn grpc.ClientConnInterface, seed uint64, id int) *grpcWorker {
	wk := &grpcWorker{p: p, rnd: rand.New(rand.NewPCG(seed, uint64(id)+1))}
	c := v1.NewPermissionsServiceClient(conn)
	for _, s := range p.w.Steps {
		wk.calls = append(wk.calls, wk.call(c, s))
	}
	return wk
}

func (wk *grpcWorker) drawer(t Template) *drawer {
	d := &drawer{tbl: wk.p.tables[t.String()], rnd: wk.rnd}
	if t.Generator != "" {
		g := wk.p.w.Generators[t.Generator]
		d.smp, d.reuse = g.Spec.New(wk.rnd), g.Reuse
	}
	return d
}

// drawers returns the drawers of a step's resource and subject. When both name one
// generator, the subject repeats the resource's draw (drawn first), so a step can name
// a pair the data set links, as deepgroups links document d<i> to user u<i>.
func (wk *grpcWorker) drawers(s Step) (res, sub *drawer) {
	res, sub = wk.drawer(s.Resource), wk.drawer(s.Subject)
	if g := s.Resource.Generator; g != "" && g == s.Subject.Generator {
		sub.pair, sub.smp = res, nil
	}
	return res, sub
}

// pick draws a step by weight.
func (wk *grpcWorker) pick() int {
	x := wk.rnd.IntN(wk.p.weights[len(wk.p.weights)-1])
	for i, c := range wk.p.weights {
		if x < c {
			return i
		}
	}
	return len(wk.p.weights) - 1
}

// do picks a step, runs it and says which it was.
func (wk *grpcWorker) do(ctx context.Context) (int, error) {
	i := wk.pick()
	return i, wk.calls[i](ctx)
}

func (wk *grpcWorker) call(c v1.PermissionsServiceClient, s Step) func(context.Context) error {
	switch s.Type {
	case StepCheck:
		return wk.check(c, s)
	case StepCheckBulk:
		return wk.checkBulk(c, s)
	case StepLookupResources:
		return wk.lookupResources(c, s)
	case StepLookupSubjects:
		return wk.lookupSubjects(c, s)
	case StepWrite:
		return wk.write(c, s)
	case StepDelete:
		return wk.delete(c, s)
	}
	return wk.read(c, s)
}

func objRef(t Template) *v1.ObjectReference { return &v1.ObjectReference{ObjectType: t.Type} }

func subject(t Template) *v1.SubjectReference {
	return &v1.SubjectReference{Object: objRef(t), OptionalRelation: t.Relation}
}

func (wk *grpcWorker) check(c v1.PermissionsServiceClient, s Step) func(context.Context) error {
	res, sub := wk.drawers(s)
	req := &v1.CheckPermissionRequest{Resource: objRef(s.Resource), Permission: s.Permission, Subject: subject(s.Subject)}
	return func(ctx context.Context) error {
		req.Resource.ObjectId, req.Subject.Object.ObjectId = res.id(), sub.id()
		req.Consistency = wk.p.consistency(s.Consistency)
		_, err := c.CheckPermission(ctx, req)
		return err
	}
}

func (wk *grpcWorker) checkBulk(c v1.PermissionsServiceClient, s Step) func(context.Context) error {
	res, sub := wk.drawers(s)
	req := &v1.CheckBulkPermissionsRequest{}
	for range s.Items {
		req.Items = append(req.Items, &v1.CheckBulkPermissionsRequestItem{Resource: objRef(s.Resource), Permission: s.Permission, Subject: subject(s.Subject)})
	}
	return func(ctx context.Context) error {
		for _, it := range req.Items {
			it.Resource.ObjectId, it.Subject.Object.ObjectId = res.id(), sub.id()
		}
		req.Consistency = wk.p.consistency(s.Consistency)
		resp, err := c.CheckBulkPermissions(ctx, req)
		if err != nil {
			return err
		}
		for _, pair := range resp.GetPairs() {
			if e := pair.GetError(); e != nil {
				return errPairFailed
			}
		}
		return nil
	}
}

// errPairFailed counts a bulk check whose call succeeded but one of whose items failed.
var errPairFailed = errors.New("a check-bulk item failed")

func (wk *grpcWorker) lookupResources(c v1.PermissionsServiceClient, s Step) func(context.Context) error {
	sub := wk.drawer(s.Subject)
	req := &v1.LookupResourcesRequest{ResourceObjectType: s.Resource.Type, Permission: s.Permission, Subject: subject(s.Subject), OptionalLimit: uint32(s.Limit)}
	return func(ctx context.Context) error {
		req.Subject.Object.ObjectId = sub.id()
		req.Consistency = wk.p.consistency(s.Consistency)
		st, err := c.LookupResources(ctx, req)
		if err != nil {
			return err
		}
		return drain(st.Recv)
	}
}

func (wk *grpcWorker) lookupSubjects(c v1.PermissionsServiceClient, s Step) func(context.Context) error {
	res := wk.drawer(s.Resource)
	req := &v1.LookupSubjectsRequest{
		Resource: objRef(s.Resource), Permission: s.Permission,
		SubjectObjectType: s.Subject.Type, OptionalSubjectRelation: s.Subject.Relation,
	}
	return func(ctx context.Context) error {
		req.Resource.ObjectId = res.id()
		req.Consistency = wk.p.consistency(s.Consistency)
		st, err := c.LookupSubjects(ctx, req)
		if err != nil {
			return err
		}
		return drain(st.Recv)
	}
}

// drain reads a stream to its end: a lookup's latency is the time to its last result.
func drain[T any](recv func() (T, error)) error {
	for {
		if _, err := recv(); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}

func (wk *grpcWorker) write(c v1.PermissionsServiceClient, s Step) func(context.Context) error {
	res, sub := wk.drawers(s)
	op := v1.RelationshipUpdate_OPERATION_TOUCH
	if s.Operation == "create" {
		op = v1.RelationshipUpdate_OPERATION_CREATE
	}
	r := &v1.Relationship{Resource: objRef(s.Resource), Relation: s.Relation, Subject: subject(s.Subject)}
	req := &v1.WriteRelationshipsRequest{Updates: []*v1.RelationshipUpdate{{Operation: op, Relationship: r}}}
	return func(ctx context.Context) error {
		r.Resource.ObjectId, r.Subject.Object.ObjectId = res.id(), sub.id()
		resp, err := c.WriteRelationships(ctx, req)
		if err != nil {
			return err
		}
		wk.p.latest.Store(&v1.Consistency{Requirement: &v1.Consistency_AtLeastAsFresh{AtLeastAsFresh: resp.GetWrittenAt()}})
		return nil
	}
}

func (wk *grpcWorker) delete(c v1.PermissionsServiceClient, s Step) func(context.Context) error {
	res, sub := wk.drawers(s)
	sf := &v1.SubjectFilter{SubjectType: s.Subject.Type}
	if s.Subject.Relation != "" {
		sf.OptionalRelation = &v1.SubjectFilter_RelationFilter{Relation: s.Subject.Relation}
	}
	f := &v1.RelationshipFilter{ResourceType: s.Resource.Type, OptionalRelation: s.Relation, OptionalSubjectFilter: sf}
	req := &v1.DeleteRelationshipsRequest{RelationshipFilter: f}
	return func(ctx context.Context) error {
		f.OptionalResourceId, sf.OptionalSubjectId = res.id(), sub.id()
		resp, err := c.DeleteRelationships(ctx, req)
		if err != nil {
			return err
		}
		wk.p.latest.Store(&v1.Consistency{Requirement: &v1.Consistency_AtLeastAsFresh{AtLeastAsFresh: resp.GetDeletedAt()}})
		return nil
	}
}

func (wk *grpcWorker) read(c v1.PermissionsServiceClient, s Step) func(context.Context) error {
	res := wk.drawer(s.Resource)
	f := &v1.RelationshipFilter{ResourceType: s.Resource.Type, OptionalRelation: s.Relation}
	req := &v1.ReadRelationshipsRequest{RelationshipFilter: f, OptionalLimit: uint32(s.Limit)}
	return func(ctx context.Context) error {
		f.OptionalResourceId = res.id()
		req.Consistency = wk.p.consistency(s.Consistency)
		st, err := c.ReadRelationships(ctx, req)
		if err != nil {
			return err
		}
		return drain(st.Recv)
	}
}

// Conn is a connection to a server speaking the SpiceDB API.
type Conn = grpc.ClientConnInterface
