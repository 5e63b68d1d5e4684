package server

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "github.com/authzed/authzed-go/proto/authzed/api/v1"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/latch-authz/latch/internal/engine/enginetest"
	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/relv1"
)

var (
	diffCases = flag.Int("spicedb-diff-cases", 25, "random schemas TestSpiceDBDifferential compares")
	diffTime  = flag.Duration("spicedb-diff-time", 30*time.Second, "time after which TestSpiceDBDifferential starts no new schema")
	diffSeed  = flag.Uint64("spicedb-diff-seed", 0, "first seed of TestSpiceDBDifferential (to replay a reported case)")
)

// spicedbPath is the SpiceDB v1.56.0 server in the shared folder beside the repository.
var spicedbPath = filepath.Join("..", "..", "..", "shared", "bin", "spicedb")

// foundSeeds found a class of disagreement in longer runs, and open every run: 197 and
// 227 LookupResources for a subject set reached through an arrow or a permission alias,
// 381 LookupSubjects with a wildcard in a nested exclusion (issue 16, items 1 and 2).
// They depend on the generator's random draws; when it changes, find new ones with a
// long run (-spicedb-diff-cases=500 -spicedb-diff-time=10m).
var foundSeeds = []uint64{197, 227, 381}

// TestSpiceDBDifferential writes random schemas and relationships to SpiceDB and to
// latch and compares, fully consistent, every check over a grid of resources and
// subjects (users and subject sets on relations and permissions), LookupResources for
// each resource type, permission and subject, and LookupSubjects for each resource,
// permission and subject type, with and without a subject relation.
//
// Schemas use neither caveats nor expiration: SpiceDB 1.56 answers some of those cases
// wrongly (a check counts an expired relationship on a subject set, LookupResources
// leaves out resources its own check calls conditional, LookupSubjects drops a definite
// subject next to a caveated wildcard), so caveats and expiration are held against the
// engine's reference evaluator instead. Without them one kind of SpiceDB answer is
// known to be wrong: a lookup that its own checks contradict, of every resource (seed
// 14207: a recursive permission through .all() in an exclusion) or of every subject
// (TestSpiceDBDifferentialNested's seed 8825: .all() over a relation that also holds a
// subject set); when latch's lookup is what SpiceDB's checks say, the difference is
// counted and logged.
// Every other difference fails the test.
func TestSpiceDBDifferential(t *testing.T) {
	spicedb := startSpiceDB(t)
	ls := start(t, nil)
	deadline := time.Now().Add(*diffTime)
	// One deadline for every call: no single call should come near it, but a server
	// that hangs ends the test instead of blocking it.
	ctx, cancel := context.WithDeadline(context.Background(), deadline.Add(2*time.Minute))
	defer cancel()
	d := &differ{
		t: t, ctx: ctx, gen: enginetest.Options{Acyclic: true},
		apis: []authzAPI{spicedb, {name: "latch", schema: ls.schema, perms: ls.perms}},
	}
	seeds := slices.Clone(foundSeeds)
	for i := range uint64(*diffCases) {
		seeds = append(seeds, *diffSeed+i)
	}
	for _, seed := range seeds {
		if time.Now().After(deadline) {
			break
		}
		if !d.runCase(seed) && d.failed >= 3 {
			t.Fatalf("stopping after %d disagreeing schemas", d.failed)
		}
	}
	t.Logf("%d schemas compared (%d refused by both, %d accepted by only one), %d answers agreed, %d queries SpiceDB gave up on (depth limit or timeout), %d lookups of SpiceDB's contradicting its own checks",
		d.cases, d.bothRefused, d.oneRefused, d.agreed, d.spicedbGaveUp, d.spicedbContradicted)
	if d.cases == 0 {
		t.Fatal("no schema was compared")
	}
}

// authzAPI is one server under comparison, reached through the authzed-go clients.
type authzAPI struct {
	name   string
	schema v1.SchemaServiceClient
	perms  v1.PermissionsServiceClient
	// conn and addr reach the server's other services and let a test dial it with
	// other credentials (the side-by-side test); unset for a cluster's nodes.
	conn *grpc.ClientConn
	addr string
	// shared: the server reads the data the API before it writes (a node of the same
	// cluster); schemas and relationships are not written through it.
	shared bool
}

// differ runs the cases on every server and keeps the tallies. The first server is
// the reference the others are compared with.
type differ struct {
	t    *testing.T
	ctx  context.Context
	apis []authzAPI // SpiceDB, latch; or one latch node and the nodes of a cluster
	gen  enginetest.Options
	// defs are the definitions the last case wrote relationships for.
	defs []string
	// caveatContexts: the case's queries are checks, each with a random caveat context
	// whose values may fail to convert (caveatQueries) instead of queries' reads.
	caveatContexts bool

	cases, bothRefused, oneRefused, agreed, spicedbGaveUp, spicedbContradicted, failed int
	// spicedbUndecided counts checks SpiceDB failed on a caveat whose value cannot
	// change the answer: with every valid value in its place SpiceDB answers latch's.
	spicedbUndecided int
	// bothFailed counts answers that were failures with the same code on both.
	bothFailed int
}

// runCase compares one random schema and its data; it reports false on a disagreement.
// The servers are two that hold data of their own, and nodes that share the second's.
func (d *differ) runCase(seed uint64) bool {
	g := enginetest.New(rand.New(rand.NewPCG(seed, 13)), d.gen)
	src := g.Schema()
	rels := g.Relationships(30+g.Rnd.IntN(40), time.Now())
	d.clear()
	d.defs = nil
	writers := d.writers()
	errs := make([]error, len(writers))
	for i, api := range writers {
		_, errs[i] = api.schema.WriteSchema(d.ctx, &v1.WriteSchemaRequest{Schema: src})
	}
	switch {
	case errs[0] != nil && errs[1] != nil:
		d.bothRefused++
		return true
	case errs[0] != nil || errs[1] != nil:
		// Counted and shown, not failed: which schemas are valid is the schema checker's
		// tests' concern, and the one difference seen is SpiceDB's (1.56 skips its check
		// of transitively included wildcards for a definition an earlier one refers to).
		d.oneRefused++
		d.t.Logf("seed %d: only one server accepts the schema\nschema:\n%s\n%s: %v\n%s: %v", seed, src, writers[0].name, errs[0], writers[1].name, errs[1])
		return true
	}
	d.cases++
	d.defs = g.Defs[1:]
	d.load(rels)
	qs := queries
	if d.caveatContexts {
		qs = caveatQueries
	}
	for _, q := range qs(g) {
		a, ok := d.compare(q)
		if ok || d.spicedbContradictsItself(q, a) || d.spicedbFailsUndecided(q, a) {
			continue
		}
		rels = d.shrink(q, rels)
		if b, ok := d.compare(q); !ok {
			a = b // the answers on the shrunk data; else the first ones, which did not agree
		}
		d.failed++
		var answers strings.Builder
		for i, api := range d.apis {
			fmt.Fprintf(&answers, "\n%-8s %s", api.name+":", a[i])
		}
		d.t.Errorf("the servers disagree (seed %d)\nschema:\n%s\nrelationships:\n%s\ncall:    %s%s",
			seed, src, enginetest.Dump(rels), q, answers.String())
		return false
	}
	return true
}

// writers are the servers that hold data of their own: the reference and the first
// node of a cluster.
func (d *differ) writers() []authzAPI {
	var w []authzAPI
	for _, api := range d.apis {
		if !api.shared {
			w = append(w, api)
		}
	}
	return w
}

// clear deletes the last case's relationships from the servers, so that the next
// schema may drop its relations.
func (d *differ) clear() {
	for _, api := range d.writers() {
		for _, def := range d.defs {
			_, err := api.perms.DeleteRelationships(d.ctx, &v1.DeleteRelationshipsRequest{RelationshipFilter: &v1.RelationshipFilter{ResourceType: def}})
			if err != nil {
				d.t.Fatalf("%s: DeleteRelationships %s: %v", api.name, def, err)
			}
		}
	}
}

// load replaces the relationships on the servers.
func (d *differ) load(rels []rel.Relationship) {
	d.clear()
	if len(rels) == 0 {
		return
	}
	updates := make([]*v1.RelationshipUpdate, len(rels))
	for i, r := range rels {
		x, err := relationshipToV1(r)
		if err != nil {
			d.t.Fatal(err)
		}
		updates[i] = &v1.RelationshipUpdate{Operation: v1.RelationshipUpdate_OPERATION_TOUCH, Relationship: x}
	}
	for _, api := range d.writers() {
		if _, err := api.perms.WriteRelationships(d.ctx, &v1.WriteRelationshipsRequest{Updates: updates}); err != nil {
			d.t.Fatalf("%s: WriteRelationships: %v\n%s", api.name, err, enginetest.Dump(rels))
		}
	}
}

// compare asks every server q and reports their answers and whether they agree with
// the first's. A query SpiceDB gives up on (its dispatch depth limit, or callTimeout on
// a loaded machine) is counted apart, unless latch fails otherwise than at its own
// depth limit.
func (d *differ) compare(q query) ([]string, bool) {
	answers := make([]string, len(d.apis))
	errs := make([]error, len(d.apis))
	for i, api := range d.apis {
		ctx, cancel := context.WithTimeout(d.ctx, callTimeout)
		answers[i], errs[i] = q.run(ctx, api)
		cancel()
		if errs[i] != nil {
			answers[i] = "error: " + errs[i].Error()
		}
	}
	agree := true
	for i := 1; i < len(d.apis); i++ {
		switch {
		case d.apis[0].name == "SpiceDB" && gaveUp(errs[0]) && (errs[i] == nil || isDepthError(errs[i])):
			d.spicedbGaveUp++
			return answers, true
		case errs[0] != nil && errs[i] != nil && status.Code(errs[0]) == status.Code(errs[i]):
			d.bothFailed++
		case errs[0] != nil || errs[i] != nil:
			agree = false
		default:
			agree = agree && answers[0] == answers[i]
		}
	}
	if agree {
		d.agreed++
	}
	return answers, agree
}

// spicedbContradictsItself reports whether SpiceDB's answer to a lookup on which the
// servers differ is contradicted by SpiceDB's own checks of every resource, which give
// the other servers' answer; such a difference is counted and logged, not failed.
func (d *differ) spicedbContradictsItself(q query, answers []string) bool {
	if q.byChecks == nil || d.apis[0].name != "SpiceDB" {
		return false
	}
	ctx, cancel := context.WithTimeout(d.ctx, callTimeout)
	defer cancel()
	checked, err := q.byChecks(ctx, d.apis[0])
	if err != nil || checked == answers[0] {
		return false
	}
	for _, a := range answers[1:] {
		if a != checked {
			return false
		}
	}
	d.spicedbContradicted++
	d.t.Logf("%s: SpiceDB answers %s, its own checks %s, as latch does", q, answers[0], checked)
	return true
}

// spicedbFailsUndecided reports whether SpiceDB failed a check on a caveat that latch
// found could not change the answer, proven by SpiceDB itself: asked again with every
// combination of valid values in place of the failing ones, it gives latch's answer
// each time. SpiceDB evaluates a permission's caveats in an order of its own and stops
// at the first that fails; such a difference is counted, not failed.
func (d *differ) spicedbFailsUndecided(q query, answers []string) bool {
	if q.valid == nil || d.apis[0].name != "SpiceDB" || !strings.HasPrefix(answers[0], "error: ") {
		return false
	}
	for _, a := range answers[1:] {
		if strings.HasPrefix(a, "error: ") {
			return false
		}
	}
	for _, c := range q.valid {
		ctx, cancel := context.WithTimeout(d.ctx, callTimeout)
		got, err := q.runWith(ctx, d.apis[0], c)
		cancel()
		if err != nil || got != answers[1] {
			return false
		}
	}
	d.spicedbUndecided++
	if d.spicedbUndecided <= 3 {
		d.t.Logf("%s: SpiceDB fails (%s), latch answers %s, as SpiceDB does for every valid value of the failing parameters", q, answers[0], answers[1])
	}
	return true
}

// caveatQueries lists checks over the grid of resources and subjects, each with a
// random caveat context (enginetest.Options.CaveatErrors: a value may fail to
// convert).
func caveatQueries(g *enginetest.Gen) []query {
	subjects := gridSubjects(g)
	var qs []query
	for _, def := range g.Defs[1:] {
		for _, name := range g.Names(def) {
			for _, id := range enginetest.IDs(def) {
				for _, s := range subjects {
					qs = append(qs, contextCheckQuery(rel.ObjectRef{Type: def, ID: id}, name, s, g.Context()))
				}
			}
		}
	}
	return qs
}

// validValues are values that convert, false and true, for the parameters of
// enginetest's caveats.
var validValues = map[string][2]any{
	"x": {0.0, 9.0}, "f": {false, true}, "t": {"2031-01-01T00:00:00Z", "2023-10-11T10:00:00Z"},
}

// contextCheckQuery is a check with caveat context c; its valid contexts replace the
// values of c that fail to convert with every combination of valid ones.
func contextCheckQuery(res rel.ObjectRef, perm string, s rel.SubjectRef, c map[string]any) query {
	runWith := func(ctx context.Context, api authzAPI, c map[string]any) (string, error) {
		pc, err := structpb.NewStruct(c)
		if err != nil {
			return "", err
		}
		resp, err := api.perms.CheckPermission(ctx, &v1.CheckPermissionRequest{
			Consistency: fullyConsistent(), Resource: relv1.Object(res), Permission: perm, Subject: relv1.Subject(s), Context: pc,
		})
		return strings.TrimPrefix(resp.GetPermissionship().String(), "PERMISSIONSHIP_"), err
	}
	q := query{
		desc:    fmt.Sprintf("CheckPermission %s#%s@%s ctx %v", res, perm, s, c),
		run:     func(ctx context.Context, api authzAPI) (string, error) { return runWith(ctx, api, c) },
		runWith: runWith,
	}
	q.valid = []map[string]any{maps.Clone(c)}
	for _, k := range slices.Sorted(maps.Keys(c)) {
		v := validValues[k]
		if v[0] == nil || reflect.TypeOf(c[k]) == reflect.TypeOf(v[0]) && (k != "t" || validTimestamp(c[k])) {
			continue
		}
		var next []map[string]any
		for _, vc := range q.valid {
			for _, x := range v {
				vc2 := maps.Clone(vc)
				vc2[k] = x
				next = append(next, vc2)
			}
		}
		q.valid = next
	}
	if len(q.valid) == 1 {
		q.valid = nil // every value converts
	}
	return q
}

func validTimestamp(v any) bool {
	s, _ := v.(string)
	_, err := time.Parse(time.RFC3339, s)
	return err == nil
}

// TestSpiceDBDifferentialCaveatErrors is TestSpiceDBDifferential's comparison of checks
// on random schemas with caveats, each check with a random context whose values fail
// to convert now and then (a malformed timestamp, a string for an int or a bool).
// latch fails a check only where a failing caveat could change the answer; SpiceDB
// fails wherever it evaluates one before the answer is settled, in an order of its
// own. So every answer must agree, except a SpiceDB failure that SpiceDB itself shows
// to be undecided (spicedbFailsUndecided), counted and logged.
func TestSpiceDBDifferentialCaveatErrors(t *testing.T) {
	spicedb := startSpiceDB(t)
	ls := start(t, nil)
	deadline := time.Now().Add(*diffTime)
	ctx, cancel := context.WithDeadline(context.Background(), deadline.Add(2*time.Minute))
	defer cancel()
	d := &differ{
		t: t, ctx: ctx, gen: enginetest.Options{Caveats: true, CaveatErrors: true, Acyclic: true}, caveatContexts: true,
		apis: []authzAPI{spicedb, {name: "latch", schema: ls.schema, perms: ls.perms}},
	}
	for i := range uint64(*diffCases) {
		if time.Now().After(deadline) {
			break
		}
		if !d.runCase(*diffSeed+i) && d.failed >= 3 {
			t.Fatalf("stopping after %d disagreeing schemas", d.failed)
		}
	}
	t.Logf("%d schemas compared (%d refused by both, %d accepted by only one), %d checks agreed (%d of them failing alike), %d SpiceDB gave up on, %d SpiceDB failed on a caveat that cannot change the answer",
		d.cases, d.bothRefused, d.oneRefused, d.agreed, d.bothFailed, d.spicedbGaveUp, d.spicedbUndecided)
	if d.cases == 0 {
		t.Fatal("no schema was compared")
	}
}

// TestSpiceDBDifferentialNested is TestSpiceDBDifferential on schemas whose every
// definition nests its first relation in itself (`relation rel0: ... | def0#rel0`,
// nested groups), which latch's index of nested sets holds: checks and lookups are
// answered by the index where it can, and must still be SpiceDB's answers.
func TestSpiceDBDifferentialNested(t *testing.T) {
	spicedb := startSpiceDB(t)
	ls := start(t, nil)
	deadline := time.Now().Add(*diffTime)
	ctx, cancel := context.WithDeadline(context.Background(), deadline.Add(2*time.Minute))
	defer cancel()
	d := &differ{
		t: t, ctx: ctx, gen: enginetest.Options{Acyclic: true, Nested: true},
		apis: []authzAPI{spicedb, {name: "latch", schema: ls.schema, perms: ls.perms}},
	}
	for i := range uint64(*diffCases) {
		if time.Now().After(deadline) {
			break
		}
		if !d.runCase(*diffSeed+i) && d.failed >= 3 {
			t.Fatalf("stopping after %d disagreeing schemas", d.failed)
		}
	}
	st := ls.srv.index.Stats()
	t.Logf("%d schemas compared (%d refused by both, %d accepted by only one), %d answers agreed, %d queries SpiceDB gave up on, %d lookups of SpiceDB's contradicting its own checks; the index answered %d reads, left %d to evaluation",
		d.cases, d.bothRefused, d.oneRefused, d.agreed, d.spicedbGaveUp, d.spicedbContradicted, st.Answers, st.Fallbacks)
	if d.cases == 0 {
		t.Fatal("no schema was compared")
	}
	if st.Answers == 0 {
		t.Fatalf("the index answered nothing: %+v", st)
	}
}

// callTimeout bounds one call; both servers answer the generated queries in milliseconds.
const callTimeout = 5 * time.Second

func gaveUp(err error) bool {
	return status.Code(err) == codes.DeadlineExceeded || isDepthError(err)
}

// isDepthError reports a call stopped at the server's depth limit, by its ErrorInfo
// reason: the status codes differ (SpiceDB FAILED_PRECONDITION, latch RESOURCE_EXHAUSTED).
func isDepthError(err error) bool {
	st, _ := status.FromError(err)
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetReason() == v1.ErrorReason_ERROR_REASON_MAXIMUM_DEPTH_EXCEEDED.String() {
			return true
		}
	}
	return false
}

// shrink drops relationships one at a time while both servers still disagree on q,
// and returns what is left, loaded on both.
func (d *differ) shrink(q query, rels []rel.Relationship) []rel.Relationship {
	for i := len(rels) - 1; i >= 0; i-- {
		fewer := slices.Delete(slices.Clone(rels), i, i+1)
		d.load(fewer)
		if _, ok := d.compare(q); !ok {
			rels = fewer
		}
	}
	d.load(rels)
	return rels
}

// query is one read both servers answer, rendered as comparable text.
type query struct {
	desc string
	run  func(context.Context, authzAPI) (string, error)
	// byChecks, for a lookup, builds run's answer from the server's checks.
	byChecks func(context.Context, authzAPI) (string, error)
	// runWith, for a check with a caveat context, runs it with another context; valid
	// lists the contexts with valid values in place of those that fail to convert
	// (nil: every value converts).
	runWith func(context.Context, authzAPI, map[string]any) (string, error)
	valid   []map[string]any
}

func (q query) String() string { return q.desc }

// queries lists the reads compared for one schema: checks over the grid of resources
// and subjects, LookupResources for each resource type, permission and subject, and
// LookupSubjects for each resource and permission, for users and for every subject
// set the schema allows plus the resource's own relation or permission.
func queries(g *enginetest.Gen) []query {
	subjects := gridSubjects(g)
	var qs []query
	for _, def := range g.Defs[1:] {
		for _, name := range g.Names(def) {
			for _, id := range enginetest.IDs(def) {
				res := rel.ObjectRef{Type: def, ID: id}
				for _, s := range subjects {
					qs = append(qs, checkQuery(res, name, s))
				}
			}
			for _, s := range subjects {
				qs = append(qs, lookupResourcesQuery(def, name, s))
			}
			for _, id := range enginetest.IDs(def) {
				res := rel.ObjectRef{Type: def, ID: id}
				for _, st := range subjectTypes(g, def+"#"+name) {
					qs = append(qs, lookupSubjectsQuery(res, name, st))
				}
			}
		}
	}
	return qs
}

// gridSubjects are the users the data names, one it does not (reached by wildcards
// alone), and four subject sets on relations and permissions of any definition.
func gridSubjects(g *enginetest.Gen) []rel.SubjectRef {
	var subjects []rel.SubjectRef
	for _, id := range append(enginetest.IDs("user"), "unseen") {
		subjects = append(subjects, rel.SubjectRef{Object: rel.ObjectRef{Type: "user", ID: id}})
	}
	for range 4 {
		subjects = append(subjects, g.SubjectSet())
	}
	return subjects
}

// subjectTypes are user and the subject sets some relation allows, plus own (the
// resource's own definition#name): a subject set holds itself.
func subjectTypes(g *enginetest.Gen, own string) []string {
	types := []string{"user", own}
	for _, allowed := range g.Allowed {
		for _, t := range allowed {
			if strings.Contains(t, "#") {
				types = append(types, t)
			}
		}
	}
	slices.Sort(types[1:])
	return slices.Compact(types)
}

func checkQuery(res rel.ObjectRef, perm string, s rel.SubjectRef) query {
	return query{
		desc: fmt.Sprintf("CheckPermission %s#%s@%s", res, perm, s),
		run: func(ctx context.Context, api authzAPI) (string, error) {
			resp, err := api.perms.CheckPermission(ctx, &v1.CheckPermissionRequest{
				Consistency: fullyConsistent(), Resource: relv1.Object(res), Permission: perm, Subject: relv1.Subject(s),
			})
			return strings.TrimPrefix(resp.GetPermissionship().String(), "PERMISSIONSHIP_"), err
		},
	}
}

func lookupResourcesQuery(typ, perm string, s rel.SubjectRef) query {
	return query{
		desc: fmt.Sprintf("LookupResources %s#%s for %s", typ, perm, s),
		run: func(ctx context.Context, api authzAPI) (string, error) {
			resps, err := drain(api.perms.LookupResources(ctx, &v1.LookupResourcesRequest{
				Consistency: fullyConsistent(), ResourceObjectType: typ, Permission: perm, Subject: relv1.Subject(s),
			}))
			var found []string
			for _, resp := range resps {
				found = append(found, resp.GetResourceObjectId()+conditional(resp.GetPermissionship()))
			}
			return setText(found), err
		},
		byChecks: func(ctx context.Context, api authzAPI) (string, error) {
			return checkedIDs(ctx, api, enginetest.IDs(typ), func(id string) *v1.CheckPermissionRequest {
				return &v1.CheckPermissionRequest{
					Consistency: fullyConsistent(), Resource: relv1.Object(rel.ObjectRef{Type: typ, ID: id}), Permission: perm, Subject: relv1.Subject(s),
				}
			})
		},
	}
}

// lookupSubjectsQuery renders the concrete subjects and, apart, the wildcard with its
// exclusions: `[u0 u1] * - [u2]`. SpiceDB may send the same wildcard twice (once per
// path to it); a repeat says nothing more.
func lookupSubjectsQuery(res rel.ObjectRef, perm, subjectType string) query {
	typ, relation, _ := strings.Cut(subjectType, "#")
	return query{
		desc: fmt.Sprintf("LookupSubjects %s#%s subjects %s", res, perm, subjectType),
		run: func(ctx context.Context, api authzAPI) (string, error) {
			resps, err := drain(api.perms.LookupSubjects(ctx, &v1.LookupSubjectsRequest{
				Consistency: fullyConsistent(), Resource: relv1.Object(res), Permission: perm,
				SubjectObjectType: typ, OptionalSubjectRelation: relation,
			}))
			var concrete, wildcard []string
			for _, resp := range resps {
				s := resp.GetSubject()
				if s.GetSubjectObjectId() != rel.Wildcard {
					concrete = append(concrete, s.GetSubjectObjectId()+conditional(s.GetPermissionship()))
					continue
				}
				var excluded []string
				for _, x := range resp.GetExcludedSubjects() {
					excluded = append(excluded, x.GetSubjectObjectId()+conditional(x.GetPermissionship()))
				}
				wildcard = append(wildcard, "*"+conditional(s.GetPermissionship())+" - "+setText(excluded))
			}
			return strings.TrimSpace(setText(concrete) + " " + strings.Trim(setText(wildcard), "[]")), err
		},
		// Checks name no wildcard: this is run's answer where it lists none.
		byChecks: func(ctx context.Context, api authzAPI) (string, error) {
			return checkedIDs(ctx, api, enginetest.IDs(typ), func(id string) *v1.CheckPermissionRequest {
				return &v1.CheckPermissionRequest{
					Consistency: fullyConsistent(), Resource: relv1.Object(res), Permission: perm,
					Subject: relv1.Subject(rel.SubjectRef{Object: rel.ObjectRef{Type: typ, ID: id}, Relation: relation}),
				}
			})
		},
	}
}

// checkedIDs renders, as a lookup's answer, the ids whose check (req(id)) the server
// grants, conditional ones marked `?`.
func checkedIDs(ctx context.Context, api authzAPI, ids []string, req func(id string) *v1.CheckPermissionRequest) (string, error) {
	var found []string
	for _, id := range ids {
		resp, err := api.perms.CheckPermission(ctx, req(id))
		if err != nil {
			return "", err
		}
		switch resp.GetPermissionship() {
		case v1.CheckPermissionResponse_PERMISSIONSHIP_HAS_PERMISSION:
			found = append(found, id)
		case v1.CheckPermissionResponse_PERMISSIONSHIP_CONDITIONAL_PERMISSION:
			found = append(found, id+"?")
		}
	}
	return setText(found), nil
}

// drain reads a server stream to its end.
func drain[T any](stream interface{ Recv() (T, error) }, err error) ([]T, error) {
	var out []T
	for err == nil {
		var m T
		if m, err = stream.Recv(); err == nil {
			out = append(out, m)
		}
	}
	if errors.Is(err, io.EOF) {
		err = nil
	}
	return out, err
}

func conditional(p v1.LookupPermissionship) string {
	if p == v1.LookupPermissionship_LOOKUP_PERMISSIONSHIP_CONDITIONAL_PERMISSION {
		return "?"
	}
	return ""
}

// setText renders ids sorted, without repeats (both servers may send an id twice).
func setText(ids []string) string {
	slices.Sort(ids)
	return "[" + strings.Join(slices.Compact(ids), " ") + "]"
}

// startSpiceDB runs SpiceDB on a free loopback port with an in-memory datastore and its
// dispatch cache off (with the cache, v1.56.0 answers some checks wrongly after earlier
// calls at the same revision; see shared/bin/README.md), until the test ends.
func startSpiceDB(t *testing.T) authzAPI {
	t.Helper()
	if _, err := os.Stat(spicedbPath); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("SpiceDB not found at %s: %v", spicedbPath, err)
		}
		t.Skipf("SpiceDB not found at %s (the shared folder beside the repository holds it): %v", spicedbPath, err)
	}
	addr := freeAddr(t)
	cmd := exec.Command(spicedbPath, "serve", "--grpc-preshared-key", testKey, "--datastore-engine", "memory",
		"--grpc-addr", addr, "--http-enabled=false", "--metrics-enabled=false", "--dispatch-cluster-enabled=false",
		"--dispatch-cache-enabled=false", "--telemetry-endpoint=", "--skip-release-check", "--log-level=error")
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatalf("start SpiceDB: %v", err)
	}
	stop := func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	}
	conn := dial(t, addr, testKey)
	t.Cleanup(func() {
		_ = conn.Close()
		stop()
		if t.Failed() && logs.Len() > 0 {
			t.Logf("SpiceDB's log:\n%s", tail(logs.String(), 4000))
		}
	})
	api := authzAPI{name: "SpiceDB", schema: v1.NewSchemaServiceClient(conn), perms: v1.NewPermissionsServiceClient(conn), conn: conn, addr: addr}
	for ready := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := api.schema.ReadSchema(ctx, &v1.ReadSchemaRequest{})
		cancel()
		if code := status.Code(err); code != codes.Unavailable && code != codes.DeadlineExceeded {
			return api
		}
		if time.Now().After(ready) {
			stop()
			t.Fatalf("SpiceDB did not answer on %s within a minute: %v\n%s", addr, err, logs.String())
		}
	}
}

// freeAddr returns a loopback address with a port free a moment ago: SpiceDB cannot
// report the port it bound, so it cannot be given port 0.
func freeAddr(t *testing.T) string {
	t.Helper()
	return freeAddrs(t, 1)[0]
}

// freeAddrs returns n loopback addresses with distinct ports, each free a moment ago:
// every port is held until all are chosen, so none is handed out twice.
func freeAddrs(t *testing.T, n int) []string {
	t.Helper()
	out := make([]string, n)
	for i := range out {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		out[i] = l.Addr().String()
	}
	return out
}

// tail returns about the last n bytes of s.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}
