package fgatest

import (
	"context"
	"fmt"
	"slices"
	"strings"

	openfgav1 "github.com/openfga/api/proto/openfga/v1"
	"github.com/openfga/language/pkg/go/transformer"
	"google.golang.org/grpc/status"
)

// Answer is what a server said to one request: the outcome, or the error code.
type Answer struct {
	Allowed bool
	List    bool     // the answer is a ListObjects answer
	Objects []string // sorted, for ListObjects
	Code    int      // OpenFGA's error code (the gRPC status code), 0 on success
	Msg     string   // the error's message, for reports (not compared)
}

func (a Answer) String() string {
	if a.Code != 0 {
		return fmt.Sprintf("error %d (%s)", a.Code, a.Msg)
	}
	if a.List {
		return fmt.Sprintf("%v", a.Objects)
	}
	return fmt.Sprintf("allowed=%v", a.Allowed)
}

func answerOf(err error) Answer {
	st, _ := status.FromError(err)
	return Answer{Code: int(st.Code()), Msg: st.Message()}
}

// Loaded is a Case set up on one server: a store with the model and the tuples.
type Loaded struct {
	client       openfgav1.OpenFGAServiceClient
	store, model string
}

// Load creates a store on client and writes the case's model and tuples. The error
// code is nonzero when the server refused the model or the tuples (compared, not
// failed: both servers must refuse the same cases).
func Load(ctx context.Context, client openfgav1.OpenFGAServiceClient, c Case) (*Loaded, Answer, error) {
	m, err := transformer.TransformDSLToProto(c.Model)
	if err != nil {
		return nil, Answer{}, fmt.Errorf("generated model does not parse: %w\n%s", err, c.Model)
	}
	store, err := client.CreateStore(ctx, &openfgav1.CreateStoreRequest{Name: "differential"})
	if err != nil {
		return nil, Answer{}, fmt.Errorf("CreateStore: %w", err)
	}
	l := &Loaded{client: client, store: store.GetId()}
	resp, err := client.WriteAuthorizationModel(ctx, &openfgav1.WriteAuthorizationModelRequest{
		StoreId:         l.store,
		SchemaVersion:   m.GetSchemaVersion(),
		TypeDefinitions: m.GetTypeDefinitions(),
		Conditions:      m.GetConditions(),
	})
	if err != nil {
		return l, answerOf(err), nil
	}
	l.model = resp.GetAuthorizationModelId()
	for start := 0; start < len(c.Tuples); start += apiLimit {
		chunk := c.Tuples[start:min(start+apiLimit, len(c.Tuples))]
		_, err := client.Write(ctx, &openfgav1.WriteRequest{
			StoreId:              l.store,
			AuthorizationModelId: l.model,
			Writes:               &openfgav1.WriteRequestWrites{TupleKeys: TupleKeys(chunk)},
		})
		if err != nil {
			return l, answerOf(err), nil
		}
	}
	return l, Answer{}, nil
}

// Check asks q as a Check.
func (l *Loaded) Check(ctx context.Context, q Query) Answer {
	resp, err := l.client.Check(ctx, &openfgav1.CheckRequest{
		StoreId:              l.store,
		AuthorizationModelId: l.model,
		TupleKey:             &openfgav1.CheckRequestTupleKey{Object: q.Object, Relation: q.Relation, User: q.User},
		ContextualTuples:     &openfgav1.ContextualTupleKeys{TupleKeys: TupleKeys(q.Contextual)},
		Context:              mustStruct(q.Context),
	})
	if err != nil {
		return answerOf(err)
	}
	return Answer{Allowed: resp.GetAllowed()}
}

// ListObjects asks q as a ListObjects of type q.Object.
func (l *Loaded) ListObjects(ctx context.Context, q Query) Answer {
	resp, err := l.client.ListObjects(ctx, &openfgav1.ListObjectsRequest{
		StoreId:              l.store,
		AuthorizationModelId: l.model,
		Type:                 q.Object,
		Relation:             q.Relation,
		User:                 q.User,
		ContextualTuples:     &openfgav1.ContextualTupleKeys{TupleKeys: TupleKeys(q.Contextual)},
		Context:              mustStruct(q.Context),
	})
	if err != nil {
		return answerOf(err)
	}
	return Answer{List: true, Objects: slices.Sorted(slices.Values(resp.GetObjects()))}
}

// ListUsers asks q as a ListUsers of object q.Object with the one filter q.User; the
// users come back as the suite writes them, sorted.
func (l *Loaded) ListUsers(ctx context.Context, q Query) Answer {
	typ, id, _ := strings.Cut(q.Object, ":")
	resp, err := l.client.ListUsers(ctx, &openfgav1.ListUsersRequest{
		StoreId:              l.store,
		AuthorizationModelId: l.model,
		Object:               &openfgav1.Object{Type: typ, Id: id},
		Relation:             q.Relation,
		UserFilters:          userFilters([]string{q.User}),
		ContextualTuples:     TupleKeys(q.Contextual),
		Context:              mustStruct(q.Context),
	})
	if err != nil {
		return answerOf(err)
	}
	users := make([]string, 0, len(resp.GetUsers()))
	for _, u := range resp.GetUsers() {
		users = append(users, UserString(u))
	}
	return Answer{List: true, Objects: slices.Sorted(slices.Values(users))}
}

// Disagreement is one request two servers answered differently.
type Disagreement struct {
	Case Case
	// Kind is "model", "write", "check", "list-objects" or "list-users";
	// "openfga-inconsistent" for a list-objects or list-users answer the other server
	// gives as OpenFGA's own Check implies it, where OpenFGA's list says otherwise;
	// "openfga-nondeterministic" for a request the reference, asked again on the same
	// data, answers otherwise than it first did; "openfga-write-order" for one it
	// answers otherwise, steadily, when the same tuples are written in the reverse
	// order (see Compare).
	Kind       string
	Query      Query
	Want, Got  Answer // the reference's answer, the other's
	Reproduced bool   // the case was shrunk and still disagrees
}

func (d Disagreement) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s: reference %s, other %s\n%s", d.Kind, d.Query, d.Want, d.Got, d.Case.Model)
	for _, t := range d.Case.Tuples {
		fmt.Fprintf(&b, "tuple %s#%s@%s", t.Object, t.Relation, t.User)
		if t.Condition != nil {
			fmt.Fprintf(&b, " with %s %v", t.Condition.Name, t.Condition.Context)
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// Compare loads c on both servers and asks every query of both: ref is the reference
// (the real OpenFGA). It returns the disagreements, each shrunk to the fewest tuples
// that still disagree on its request.
//
// A disagreement on a request the reference answers otherwise when asked again on
// fresh stores with the same data (up to twice) is of kind "openfga-nondeterministic"
// and not shrunk: OpenFGA v1.22.1's planner picks among its check strategies at
// random (Thompson sampling; about one pick in a hundred goes to its default strategy
// over the weight-two one it prefers), and where the strategies read different tuples
// a condition lacking a parameter fails one and not the other. One the reference
// answers otherwise, the same way twice, with the case's tuples written in the
// reverse order is of kind "openfga-write-order", not shrunk either: reading a
// relation from the user's side, OpenFGA evaluates one tuple per object, the first
// its store yields (its memory store: the first written), so of `doc:1#viewer@user:1
// with a false condition` and `doc:1#viewer@user:* with a true one` only the first
// written counts; latch, whose order is the tuples' own, evaluates both.
func Compare(ctx context.Context, ref, other openfgav1.OpenFGAServiceClient, c Case) ([]Disagreement, error) {
	out, err := compareOnce(ctx, ref, other, c)
	if err != nil {
		return nil, err
	}
	for i, d := range out {
		one := d.Case
		one.Checks, one.Lists, one.Users = nil, nil, nil
		switch d.Kind {
		case "check":
			one.Checks = []Query{d.Query}
		case "list-objects":
			one.Lists = []Query{d.Query}
		case "list-users":
			one.Users = []Query{d.Query}
		default:
			continue
		}
		kind, err := unstableKind(ctx, ref, one, d.Want)
		if err != nil {
			return nil, err
		}
		if kind != "" {
			out[i].Kind = kind
			continue
		}
		shrunk, err := shrink(ctx, ref, other, one)
		if err != nil {
			return nil, err
		}
		out[i] = shrunk
	}
	return out, nil
}

func compareOnce(ctx context.Context, ref, other openfgav1.OpenFGAServiceClient, c Case) ([]Disagreement, error) {
	a, wantLoad, err := Load(ctx, ref, c)
	if err != nil {
		return nil, err
	}
	b, gotLoad, err := Load(ctx, other, c)
	if err != nil {
		return nil, err
	}
	if !sameAnswer(wantLoad, gotLoad) {
		kind := "write"
		if a.model == "" || b.model == "" {
			kind = "model"
		}
		return []Disagreement{{Case: c, Kind: kind, Want: wantLoad, Got: gotLoad}}, nil
	}
	if wantLoad.Code != 0 {
		return nil, nil
	}
	var out []Disagreement
	for _, q := range c.Checks {
		if want, got := a.Check(ctx, q), b.Check(ctx, q); !sameAnswer(want, got) {
			out = append(out, Disagreement{Case: c, Kind: "check", Query: q, Want: want, Got: got})
		}
	}
	for _, q := range c.Lists {
		want, got := a.ListObjects(ctx, q), b.ListObjects(ctx, q)
		if sameAnswer(want, got) {
			continue
		}
		kind := "list-objects"
		if sameAnswer(a.impliedByCheck(ctx, q), got) {
			kind = "openfga-inconsistent"
		}
		out = append(out, Disagreement{Case: c, Kind: kind, Query: q, Want: want, Got: got})
	}
	for _, q := range c.Users {
		want, got := a.ListUsers(ctx, q), b.ListUsers(ctx, q)
		if sameAnswer(want, got) {
			continue
		}
		kind := "list-users"
		if a.checksAgree(ctx, q, want, got) {
			kind = "openfga-inconsistent"
		}
		out = append(out, Disagreement{Case: c, Kind: kind, Query: q, Want: want, Got: got})
	}
	return out, ctx.Err()
}

// unstableKind asks the reference the one request of c again: twice on fresh stores
// ("openfga-nondeterministic" if an answer differs from first), then twice with c's
// tuples written in the reverse order ("openfga-write-order" if both answers differ
// from first and agree); "" when every answer is first.
func unstableKind(ctx context.Context, ref openfgav1.OpenFGAServiceClient, c Case, first Answer) (string, error) {
	for range 2 {
		a, err := askFresh(ctx, ref, c)
		if err != nil {
			return "", err
		}
		if !sameAnswer(a, first) {
			return "openfga-nondeterministic", nil
		}
	}
	reversed := c
	reversed.Tuples = slices.Clone(c.Tuples)
	slices.Reverse(reversed.Tuples)
	a1, err := askFresh(ctx, ref, reversed)
	if err != nil || sameAnswer(a1, first) {
		return "", err
	}
	a2, err := askFresh(ctx, ref, reversed)
	if err != nil || !sameAnswer(a1, a2) {
		return "", err
	}
	return "openfga-write-order", nil
}

// askFresh loads c on a fresh store of client and asks its one request.
func askFresh(ctx context.Context, client openfgav1.OpenFGAServiceClient, c Case) (Answer, error) {
	l, load, err := Load(ctx, client, c)
	if err != nil || load.Code != 0 {
		return load, err
	}
	switch {
	case len(c.Checks) > 0:
		return l.Check(ctx, c.Checks[0]), nil
	case len(c.Lists) > 0:
		return l.ListObjects(ctx, c.Lists[0]), nil
	}
	return l.ListUsers(ctx, c.Users[0]), nil
}

// impliedByCheck is the ListObjects answer this server's Check gives for q: the
// objects of the type (as RandomCase draws them) it allows, or the first error. Where
// the real OpenFGA's ListObjects differs from its own Check (it fails on a tuple whose
// condition lacks a parameter that no Check of any object needs, or lists an object
// its Check denies), the other server agreeing with OpenFGA's Check is not a
// disagreement about OpenFGA's semantics, and is reported apart.
func (l *Loaded) impliedByCheck(ctx context.Context, q Query) Answer {
	implied := Answer{List: true}
	for i := range objectsPerType {
		one := q
		one.Object = fmt.Sprintf("%s:%d", q.Object, i)
		a := l.Check(ctx, one)
		if a.Code != 0 {
			return a
		}
		if a.Allowed {
			implied.Objects = append(implied.Objects, one.Object)
		}
	}
	return implied
}

// checksAgree reports whether this server's Check sides with got on every user where
// its own ListUsers answer want differs from got (both lists): allowed for each user got
// lists and want does not, denied for each one want lists and got does not.
func (l *Loaded) checksAgree(ctx context.Context, q Query, want, got Answer) bool {
	if want.Code != 0 || got.Code != 0 {
		return false
	}
	for _, u := range symmetricDifference(want.Objects, got.Objects) {
		one := q
		one.User = u
		a := l.Check(ctx, one)
		if a.Code != 0 || a.Allowed != slices.Contains(got.Objects, u) {
			return false
		}
	}
	return true
}

func symmetricDifference(a, b []string) []string {
	var out []string
	for _, x := range a {
		if !slices.Contains(b, x) {
			out = append(out, x)
		}
	}
	for _, x := range b {
		if !slices.Contains(a, x) {
			out = append(out, x)
		}
	}
	return out
}

func inconsistent(d Disagreement) bool { return d.Kind == "openfga-inconsistent" }

// unstable reports whether d is a request whose answer OpenFGA itself does not hold
// to (see Compare).
func unstable(d Disagreement) bool {
	return d.Kind == "openfga-nondeterministic" || d.Kind == "openfga-write-order"
}

func sameAnswer(a, b Answer) bool {
	return a.Code == b.Code && a.Allowed == b.Allowed && slices.Equal(a.Objects, b.Objects)
}

// shrink drops tuples from a one-query case for as long as the servers still disagree
// on it, and returns the smallest disagreement found.
func shrink(ctx context.Context, ref, other openfgav1.OpenFGAServiceClient, c Case) (Disagreement, error) {
	best, err := compareOnce(ctx, ref, other, c)
	best = slices.DeleteFunc(best, inconsistent)
	if err != nil || len(best) == 0 {
		// Not reproduced on fresh stores: report the case as first seen.
		q := slices.Concat(c.Checks, c.Lists, c.Users)[0]
		return Disagreement{Case: c, Kind: "unreproduced", Query: q}, err
	}
	for i := 0; i < len(c.Tuples); {
		smaller := c
		smaller.Tuples = slices.Delete(slices.Clone(c.Tuples), i, i+1)
		ds, err := compareOnce(ctx, ref, other, smaller)
		if err != nil {
			return Disagreement{}, err
		}
		ds = slices.DeleteFunc(ds, inconsistent)
		if len(ds) > 0 {
			c, best = smaller, ds
			continue
		}
		i++
	}
	best[0].Reproduced = true
	return best[0], nil
}
