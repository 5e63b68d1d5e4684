package fga

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	openfgav1 "github.com/openfga/api/proto/openfga/v1"
	"google.golang.org/protobuf/types/known/structpb"
	"gopkg.in/yaml.v3"

	"github.com/latch-authz/latch/internal/engine"
	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/store"
	"github.com/latch-authz/latch/internal/store/memory"
)

// The shape of OpenFGA's conformance suite (assets/tests/*.yaml in openfga/openfga).
type (
	suiteYAML struct {
		Tests []struct {
			Name   string
			Stages []stageYAML
		}
	}
	stageYAML struct {
		Model                 string
		Tuples                []tupleYAML
		CheckAssertions       []checkYAML       `yaml:"checkAssertions"`
		ListObjectsAssertions []listObjectsYAML `yaml:"listObjectsAssertions"`
		ListUsersAssertions   []listUsersYAML   `yaml:"listUsersAssertions"`
	}
	tupleYAML struct {
		Object, Relation, User string
		Condition              *struct {
			Name    string
			Context map[string]any
		}
	}
	checkYAML struct {
		Tuple            tupleYAML
		ContextualTuples []tupleYAML `yaml:"contextualTuples"`
		Context          map[string]any
		Expectation      bool
		ErrorCode        int `yaml:"errorCode"`
	}
	listObjectsYAML struct {
		Request struct {
			User, Type, Relation string
		}
		ContextualTuples []tupleYAML `yaml:"contextualTuples"`
		Context          map[string]any
		Expectation      []string
		ErrorCode        int `yaml:"errorCode"`
	}
	listUsersYAML struct {
		Request struct {
			Filters          []string
			Object, Relation string
		}
		ContextualTuples []tupleYAML `yaml:"contextualTuples"`
		Context          map[string]any
		Expectation      []string
		ErrorCode        int `yaml:"errorCode"`
	}
)

func (t tupleYAML) key(tb testing.TB) *openfgav1.TupleKey {
	tk := &openfgav1.TupleKey{Object: t.Object, Relation: t.Relation, User: t.User}
	if t.Condition != nil {
		tk.Condition = &openfgav1.RelationshipCondition{Name: t.Condition.Name, Context: toStruct(tb, t.Condition.Context)}
	}
	return tk
}

func keys(tb testing.TB, ts []tupleYAML) []*openfgav1.TupleKey {
	out := make([]*openfgav1.TupleKey, 0, len(ts))
	for _, t := range ts {
		out = append(out, t.key(tb))
	}
	return out
}

// toStruct passes a context through the wire form an API request has.
func toStruct(tb testing.TB, m map[string]any) *structpb.Struct {
	if m == nil {
		return nil
	}
	s, err := structpb.NewStruct(m)
	if err != nil {
		tb.Fatalf("context %v: %v", m, err)
	}
	return s
}

// TestOpenFGAConformance runs OpenFGA's own conformance suite in-process: per stage,
// the model is parsed and compiled, its tuples written to a memory store, and every
// check, list-objects and list-users assertion answered under OpenFGA's semantics;
// single-stage tests run again with the stage's tuples sent as contextual tuples, as
// OpenFGA's harness runs them.
func TestOpenFGAConformance(t *testing.T) {
	total, failed := 0, 0
	for _, file := range []string{"consolidated_1_1_tests.yaml", "abac_tests.yaml"} {
		data, err := os.ReadFile("../../../shared/conformance/openfga/" + file)
		if err != nil {
			t.Fatal(err)
		}
		var suite suiteYAML
		if err := yaml.Unmarshal(data, &suite); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		for _, test := range suite.Tests {
			modes := []bool{false}
			if len(test.Stages) == 1 {
				modes = append(modes, true)
			}
			for _, contextual := range modes {
				name := test.Name
				if contextual {
					name += "/contextual"
				}
				t.Run(name, func(t *testing.T) {
					// The stages share a store: a later stage's model meets the
					// tuples written under the earlier ones.
					s := memory.New(memory.Options{})
					defer s.Close()
					for i, st := range test.Stages {
						n, f := runStage(t, s, fmt.Sprintf("stage %d", i), st, contextual)
						total, failed = total+n, failed+f
					}
				})
			}
		}
	}
	t.Logf("OpenFGA conformance: %d of %d assertions pass", total-failed, total)
}

// runStage answers one stage's assertions and returns how many there were and failed.
func runStage(t *testing.T, s store.Store, name string, st stageYAML, contextual bool) (total, failed int) {
	ctx := context.Background()
	pm, probs := ParseDSL(st.Model)
	if len(probs) > 0 {
		t.Fatalf("%s: ParseDSL: %v", name, probs)
	}
	m, probs := Compile(pm)
	if len(probs) > 0 {
		t.Fatalf("%s: Compile: %v", name, probs)
	}
	var stageTuples []*openfgav1.TupleKey
	if contextual {
		stageTuples = keys(t, st.Tuples)
	} else if len(st.Tuples) > 0 {
		updates := make([]store.Update, 0, len(st.Tuples))
		for _, tk := range keys(t, st.Tuples) {
			x, err := m.Relationship(tk)
			if err != nil {
				t.Fatalf("%s: tuple %v: %v", name, tk, err)
			}
			updates = append(updates, store.Update{Op: store.Touch, Relationship: x})
		}
		if _, err := s.Write(ctx, nil, updates, nil); err != nil {
			t.Fatal(err)
		}
	}
	rev, err := s.HeadRevision(ctx)
	if err != nil {
		t.Fatal(err)
	}
	base, err := s.Reader(ctx, rev)
	if err != nil {
		t.Fatal(err)
	}
	e := engine.New(engine.Config{Semantics: engine.OpenFGA, MaxDepth: engine.OpenFGAMaxDepth})
	reader := func(extra []tupleYAML) (store.Reader, error) {
		all := keys(t, extra)
		for _, tk := range stageTuples {
			// A stage tuple the assertion also sends is sent once.
			if !slices.ContainsFunc(all, func(x *openfgav1.TupleKey) bool {
				return x.Object == tk.Object && x.Relation == tk.Relation && x.User == tk.User
			}) {
				all = append(all, tk)
			}
		}
		return m.Reader(base, all, time.Now())
	}
	fail := func(format string, args ...any) {
		failed++
		t.Errorf(name+": "+format, args...)
	}
	for _, a := range st.CheckAssertions {
		total++
		got, err := check(ctx, e, m, reader, a, t)
		what := fmt.Sprintf("check %s#%s@%s ctx=%v ctxtuples=%d", a.Tuple.Object, a.Tuple.Relation, a.Tuple.User, a.Context, len(a.ContextualTuples))
		if msg := compare(err, a.ErrorCode, func() string {
			if got != a.Expectation {
				return fmt.Sprintf("got %v, want %v", got, a.Expectation)
			}
			return ""
		}); msg != "" {
			fail("%s: %s", what, msg)
		}
	}
	for _, a := range st.ListObjectsAssertions {
		total++
		got, err := listObjects(ctx, e, m, reader, a, t)
		what := fmt.Sprintf("list objects %s#%s@%s ctx=%v", a.Request.Type, a.Request.Relation, a.Request.User, a.Context)
		if msg := compare(err, a.ErrorCode, func() string { return sameSet(got, a.Expectation) }); msg != "" {
			fail("%s: %s", what, msg)
		}
	}
	for _, a := range st.ListUsersAssertions {
		total++
		got, err := listUsers(ctx, m, reader, a, t)
		what := fmt.Sprintf("list users %v of %s#%s ctx=%v", a.Request.Filters, a.Request.Object, a.Request.Relation, a.Context)
		if msg := compare(err, a.ErrorCode, func() string { return sameSet(got, a.Expectation) }); msg != "" {
			fail("%s: %s", what, msg)
		}
	}
	return total, failed
}

// compare judges an answer: the expected error code, or no error and what answer says.
func compare(err error, wantCode int, answer func() string) string {
	switch {
	case wantCode != 0 && err == nil:
		return fmt.Sprintf("got no error, want code %d", wantCode)
	case wantCode != 0 && int(ErrorCode(err)) != wantCode:
		return fmt.Sprintf("got error %v (code %d), want code %d", err, ErrorCode(err), wantCode)
	case wantCode != 0:
		return ""
	case err != nil:
		return fmt.Sprintf("unexpected error %v (code %d)", err, ErrorCode(err))
	}
	return answer()
}

func sameSet(got, want []string) string {
	got, want = slices.Clone(got), slices.Clone(want)
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		return fmt.Sprintf("got %v, want %v", got, want)
	}
	return ""
}

type readerFunc func(extra []tupleYAML) (store.Reader, error)

func check(ctx context.Context, e *engine.Engine, m *Model, reader readerFunc, a checkYAML, tb testing.TB) (bool, error) {
	req, err := m.CheckRequest(a.Tuple.Object, a.Tuple.Relation, a.Tuple.User, toStruct(tb, a.Context))
	if err != nil {
		return false, err
	}
	r, err := reader(a.ContextualTuples)
	if err != nil {
		return false, err
	}
	res, err := e.Check(ctx, m.Schema, r, req)
	if err != nil {
		return false, err
	}
	return Allowed(res)
}

func listObjects(ctx context.Context, e *engine.Engine, m *Model, reader readerFunc, a listObjectsYAML, tb testing.TB) ([]string, error) {
	req, err := m.LookupResourcesRequest(a.Request.Type, a.Request.Relation, a.Request.User, toStruct(tb, a.Context))
	if err != nil {
		return nil, err
	}
	r, err := reader(a.ContextualTuples)
	if err != nil {
		return nil, err
	}
	ids, err := ListObjects(ctx, e, m, r, req)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(ids))
	for _, id := range ids {
		out = append(out, a.Request.Type+":"+id)
	}
	return out, nil
}

func listUsers(ctx context.Context, m *Model, reader readerFunc, a listUsersYAML, tb testing.TB) ([]string, error) {
	obj, err := ParseObject(a.Request.Object)
	if err != nil {
		return nil, newError(openfgav1.ErrorCode_validation_error, "%v", err)
	}
	var filters []*openfgav1.UserTypeFilter
	for _, f := range a.Request.Filters {
		typ, relation, _ := strings.Cut(f, "#")
		filters = append(filters, &openfgav1.UserTypeFilter{Type: typ, Relation: relation})
	}
	r, err := reader(a.ContextualTuples)
	if err != nil {
		return nil, err
	}
	users, err := ListUsers(ctx, m, r, obj, a.Request.Relation, filters, toStruct(tb, a.Context).AsMap())
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(users))
	for _, u := range users {
		out = append(out, userString(u))
	}
	return out, nil
}

func userString(u *openfgav1.User) string {
	switch x := u.GetUser().(type) {
	case *openfgav1.User_Wildcard:
		return x.Wildcard.GetType() + ":" + rel.Wildcard
	case *openfgav1.User_Userset:
		return x.Userset.GetType() + ":" + x.Userset.GetId() + "#" + x.Userset.GetRelation()
	}
	return u.GetObject().GetType() + ":" + u.GetObject().GetId()
}
