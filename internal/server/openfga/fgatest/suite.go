// Package fgatest holds the proofs over the wire that a server speaks OpenFGA: OpenFGA's
// YAML conformance suite run through its gRPC API the way OpenFGA's own harness runs it,
// a real OpenFGA server started from its binary for comparison, and random models and
// tuples for the differential test between the two. Only tests import it.
package fgatest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	openfgav1 "github.com/openfga/api/proto/openfga/v1"
	"github.com/openfga/language/pkg/go/transformer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"
	"gopkg.in/yaml.v3"
)

// Suite is one file of OpenFGA's conformance suite (assets/tests/*.yaml in OpenFGA).
type Suite struct {
	Tests []Test `yaml:"tests"`
}

// Test is a named sequence of stages run in one store.
type Test struct {
	Name   string  `yaml:"name"`
	Stages []Stage `yaml:"stages"`
}

// Stage writes a model and tuples to the test's store, then asks its assertions.
type Stage struct {
	Model                 string                 `yaml:"model"`
	Tuples                []Tuple                `yaml:"tuples"`
	CheckAssertions       []CheckAssertion       `yaml:"checkAssertions"`
	ListObjectsAssertions []ListObjectsAssertion `yaml:"listObjectsAssertions"`
	ListUsersAssertions   []ListUsersAssertion   `yaml:"listUsersAssertions"`
}

// Tuple is a relationship tuple in the suite's YAML.
type Tuple struct {
	Object    string     `yaml:"object"`
	Relation  string     `yaml:"relation"`
	User      string     `yaml:"user"`
	Condition *Condition `yaml:"condition"`
}

// Condition names a tuple's condition and the parameters the tuple fixes.
type Condition struct {
	Name    string         `yaml:"name"`
	Context map[string]any `yaml:"context"`
}

// CheckAssertion expects Check of Tuple to answer Expectation, or to fail with ErrorCode.
type CheckAssertion struct {
	Tuple            Tuple          `yaml:"tuple"`
	ContextualTuples []Tuple        `yaml:"contextualTuples"`
	Context          map[string]any `yaml:"context"`
	Expectation      bool           `yaml:"expectation"`
	ErrorCode        int            `yaml:"errorCode"`
}

// ListObjectsAssertion expects ListObjects to return exactly Expectation (in any order).
type ListObjectsAssertion struct {
	Request struct {
		User     string `yaml:"user"`
		Type     string `yaml:"type"`
		Relation string `yaml:"relation"`
	} `yaml:"request"`
	ContextualTuples []Tuple        `yaml:"contextualTuples"`
	Context          map[string]any `yaml:"context"`
	Expectation      []string       `yaml:"expectation"`
	ErrorCode        int            `yaml:"errorCode"`
}

// ListUsersAssertion expects ListUsers to return exactly Expectation (in any order).
type ListUsersAssertion struct {
	Request struct {
		Filters  []string `yaml:"filters"` // "user" or "group#member"
		Object   string   `yaml:"object"`
		Relation string   `yaml:"relation"`
	} `yaml:"request"`
	ContextualTuples []Tuple        `yaml:"contextualTuples"`
	Context          map[string]any `yaml:"context"`
	Expectation      []string       `yaml:"expectation"`
	ErrorCode        int            `yaml:"errorCode"`
}

// LoadSuite reads one YAML file of the suite.
func LoadSuite(path string) (*Suite, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var s Suite
	if err := yaml.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(s.Tests) == 0 {
		return nil, fmt.Errorf("%s: no tests", path)
	}
	return &s, nil
}

// writeChunk is how many tuples one Write carries, as in OpenFGA's harness (the API
// allows 100).
const writeChunk = 40

// apiLimit is the most tuples OpenFGA's API takes in one Write and as contextual tuples
// of one request: a stage with more tuples is not rerun with them sent as contextual
// tuples.
const apiLimit = 100

// Counts tallies the assertions a run asked, by kind; each counts once however many
// requests it took (ListObjects is asked twice, streamed and not).
type Counts struct {
	Check, ListObjects, ListUsers atomic.Int64
}

func (c *Counts) String() string {
	return fmt.Sprintf("%d check, %d list-objects and %d list-users assertions",
		c.Check.Load(), c.ListObjects.Load(), c.ListUsers.Load())
}

// Run runs every test of the suites against client as OpenFGA's harness does: each test
// in a new store, its stages in order (model, then the stage's tuples in shuffled
// chunks, then its assertions against that model); then each single-stage test again
// in another store with the stage's tuples sent as contextual tuples on every request
// instead of written. Every object ListObjects returns and every user ListUsers returns
// must also pass Check. Tests run in parallel.
func Run(t *testing.T, client openfgav1.OpenFGAServiceClient, counts *Counts, suites ...*Suite) {
	for _, s := range suites {
		for _, test := range s.Tests {
			for _, contextual := range []bool{false, true} {
				name := test.Name
				if contextual {
					name += "_ctxTuples"
				}
				t.Run(name, func(t *testing.T) {
					if contextual && len(test.Stages) > 1 {
						t.Skip("a multi-stage test expects its tuples to be stored")
					}
					t.Parallel()
					runTest(t, client, counts, test, contextual)
				})
			}
		}
	}
}

func runTest(t *testing.T, client openfgav1.OpenFGAServiceClient, counts *Counts, test Test, contextual bool) {
	ctx := context.Background()
	store, err := client.CreateStore(ctx, &openfgav1.CreateStoreRequest{Name: test.Name})
	if err != nil {
		t.Fatalf("CreateStore: %v", err)
	}
	for i, stage := range test.Stages {
		if contextual && len(stage.Tuples) > apiLimit {
			t.Logf("stage %d: %d tuples are more than one request may carry as contextual tuples", i, len(stage.Tuples))
			continue
		}
		r := &stageRun{client: client, counts: counts, store: store.GetId(), stage: stage}
		if contextual {
			r.extra = stage.Tuples
		}
		if !r.setUp(t, i) {
			return
		}
		r.checks(t, i)
		r.listObjects(t, i)
		r.listUsers(t, i)
	}
}

// stageRun is one stage of a test against one store.
type stageRun struct {
	client openfgav1.OpenFGAServiceClient
	counts *Counts
	store  string
	model  string
	stage  Stage
	extra  []Tuple // the stage's tuples, when they are sent as contextual tuples
}

func (r *stageRun) setUp(t *testing.T, i int) bool {
	ctx := context.Background()
	m, err := transformer.TransformDSLToProto(r.stage.Model)
	if err != nil {
		t.Errorf("stage %d: the suite's model does not parse: %v", i, err)
		return false
	}
	resp, err := r.client.WriteAuthorizationModel(ctx, &openfgav1.WriteAuthorizationModelRequest{
		StoreId:         r.store,
		SchemaVersion:   m.GetSchemaVersion(),
		TypeDefinitions: m.GetTypeDefinitions(),
		Conditions:      m.GetConditions(),
	})
	if err != nil {
		t.Errorf("stage %d: WriteAuthorizationModel: %v", i, err)
		return false
	}
	r.model = resp.GetAuthorizationModelId()
	if r.extra != nil {
		return true
	}
	tuples := slices.Clone(r.stage.Tuples)
	rand.Shuffle(len(tuples), func(a, b int) { tuples[a], tuples[b] = tuples[b], tuples[a] })
	for start := 0; start < len(tuples); start += writeChunk {
		chunk := tuples[start:min(start+writeChunk, len(tuples))]
		_, err := r.client.Write(ctx, &openfgav1.WriteRequest{
			StoreId:              r.store,
			AuthorizationModelId: r.model,
			Writes:               &openfgav1.WriteRequestWrites{TupleKeys: TupleKeys(chunk)},
		})
		if err != nil {
			t.Errorf("stage %d: Write: %v", i, err)
			return false
		}
	}
	return true
}

// contextual is what a request of this stage sends as contextual tuples: the
// assertion's own, and the stage's when they are not stored.
func (r *stageRun) contextual(own []Tuple) []*openfgav1.TupleKey {
	ts := slices.Concat(own, r.extra)
	rand.Shuffle(len(ts), func(a, b int) { ts[a], ts[b] = ts[b], ts[a] })
	return TupleKeys(ts)
}

func (r *stageRun) checks(t *testing.T, i int) {
	for n, a := range r.stage.CheckAssertions {
		what := fmt.Sprintf("stage %d check %d: %s#%s@%s", i, n, a.Tuple.Object, a.Tuple.Relation, a.Tuple.User)
		resp, err := r.check(a.Tuple.Object, a.Tuple.Relation, a.Tuple.User, a.ContextualTuples, a.Context)
		r.counts.Check.Add(1)
		if !expectCode(t, what, err, a.ErrorCode) || err != nil {
			continue
		}
		if resp.GetAllowed() != a.Expectation {
			t.Errorf("%s (context %v): allowed %v, want %v", what, a.Context, resp.GetAllowed(), a.Expectation)
		}
	}
}

func (r *stageRun) check(object, relation, user string, own []Tuple, context map[string]any) (*openfgav1.CheckResponse, error) {
	ctx, cancel := requestContext()
	defer cancel()
	return r.client.Check(ctx, &openfgav1.CheckRequest{
		StoreId:              r.store,
		AuthorizationModelId: r.model,
		TupleKey:             &openfgav1.CheckRequestTupleKey{Object: object, Relation: relation, User: user},
		ContextualTuples:     &openfgav1.ContextualTupleKeys{TupleKeys: r.contextual(own)},
		Context:              mustStruct(context),
		Trace:                true,
	})
}

func (r *stageRun) listObjects(t *testing.T, i int) {
	for n, a := range r.stage.ListObjectsAssertions {
		what := fmt.Sprintf("stage %d list objects %d: %s#%s@%s", i, n, a.Request.Type, a.Request.Relation, a.Request.User)
		r.counts.ListObjects.Add(1)
		ctx, cancel := requestContext()
		resp, err := r.client.ListObjects(ctx, &openfgav1.ListObjectsRequest{
			StoreId:              r.store,
			AuthorizationModelId: r.model,
			Type:                 a.Request.Type,
			Relation:             a.Request.Relation,
			User:                 a.Request.User,
			ContextualTuples:     &openfgav1.ContextualTupleKeys{TupleKeys: r.contextual(a.ContextualTuples)},
			Context:              mustStruct(a.Context),
		})
		cancel()
		if expectCode(t, what, err, a.ErrorCode) && err == nil {
			expectSet(t, what, resp.GetObjects(), a.Expectation)
			for _, object := range resp.GetObjects() {
				r.mustAllow(t, what, object, a.Request.Relation, a.Request.User, a.ContextualTuples, a.Context)
			}
		}
		streamed, err := r.streamedListObjects(a)
		if expectCode(t, what+" (streamed)", err, a.ErrorCode) && err == nil {
			expectSet(t, what+" (streamed)", streamed, a.Expectation)
		}
	}
}

func (r *stageRun) streamedListObjects(a ListObjectsAssertion) ([]string, error) {
	ctx, cancel := requestContext()
	defer cancel()
	stream, err := r.client.StreamedListObjects(ctx, &openfgav1.StreamedListObjectsRequest{
		StoreId:              r.store,
		AuthorizationModelId: r.model,
		Type:                 a.Request.Type,
		Relation:             a.Request.Relation,
		User:                 a.Request.User,
		ContextualTuples:     &openfgav1.ContextualTupleKeys{TupleKeys: r.contextual(a.ContextualTuples)},
		Context:              mustStruct(a.Context),
	})
	if err != nil {
		return nil, err
	}
	return recvAll(stream)
}

// recvAll reads a StreamedListObjects stream to its end.
func recvAll(stream openfgav1.OpenFGAService_StreamedListObjectsClient) ([]string, error) {
	var objects []string
	for {
		msg, err := stream.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return objects, nil
			}
			return objects, err
		}
		objects = append(objects, msg.GetObject())
	}
}

func (r *stageRun) listUsers(t *testing.T, i int) {
	for n, a := range r.stage.ListUsersAssertions {
		what := fmt.Sprintf("stage %d list users %d: %s#%s filters %v", i, n, a.Request.Object, a.Request.Relation, a.Request.Filters)
		r.counts.ListUsers.Add(1)
		if a.ErrorCode != 0 && len(a.Expectation) > 0 {
			t.Errorf("%s: the suite expects both an error and users", what)
			continue
		}
		typ, id, _ := strings.Cut(a.Request.Object, ":")
		ctx, cancel := requestContext()
		resp, err := r.client.ListUsers(ctx, &openfgav1.ListUsersRequest{
			StoreId:              r.store,
			AuthorizationModelId: r.model,
			Object:               &openfgav1.Object{Type: typ, Id: id},
			Relation:             a.Request.Relation,
			UserFilters:          userFilters(a.Request.Filters),
			ContextualTuples:     r.contextual(a.ContextualTuples),
			Context:              mustStruct(a.Context),
		})
		cancel()
		if !expectCode(t, what, err, a.ErrorCode) || err != nil {
			continue
		}
		users := make([]string, 0, len(resp.GetUsers()))
		for _, u := range resp.GetUsers() {
			users = append(users, UserString(u))
		}
		expectSet(t, what, users, a.Expectation)
		for _, u := range users {
			r.mustAllow(t, what, a.Request.Object, a.Request.Relation, u, a.ContextualTuples, a.Context)
		}
	}
}

// mustAllow holds a listed answer to Check: what ListObjects or ListUsers returns, Check
// must allow.
func (r *stageRun) mustAllow(t *testing.T, what, object, relation, user string, own []Tuple, context map[string]any) {
	resp, err := r.check(object, relation, user, own, context)
	if err != nil {
		t.Errorf("%s: Check of listed %s#%s@%s: %v", what, object, relation, user, err)
	} else if !resp.GetAllowed() {
		t.Errorf("%s: listed %s#%s@%s, which Check denies", what, object, relation, user)
	}
}

// requestContext bounds one request, so that a server that hangs fails the test rather
// than the test binary's timeout.
func requestContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 60*time.Second)
}

// expectCode reports whether err is what the assertion expects: no error when code is
// 0, else a gRPC status whose code is OpenFGA's error code (OpenFGA puts its own codes,
// 2000 for validation errors, in the status code itself).
func expectCode(t *testing.T, what string, err error, code int) bool {
	t.Helper()
	switch {
	case code == 0 && err != nil:
		t.Errorf("%s: %v", what, err)
		return false
	case code != 0 && err == nil:
		t.Errorf("%s: succeeded, want error code %d", what, code)
		return false
	case code != 0:
		st, ok := status.FromError(err)
		if !ok || int(st.Code()) != code {
			t.Errorf("%s: error %v, want code %d", what, err, code)
			return false
		}
	}
	return true
}

func expectSet(t *testing.T, what string, got, want []string) {
	t.Helper()
	g, w := slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(want))
	if !slices.Equal(g, w) {
		t.Errorf("%s: got %v, want %v", what, g, w)
	}
}

// TupleKeys converts the suite's tuples to the API's.
func TupleKeys(ts []Tuple) []*openfgav1.TupleKey {
	keys := make([]*openfgav1.TupleKey, 0, len(ts))
	for _, tu := range ts {
		k := &openfgav1.TupleKey{Object: tu.Object, Relation: tu.Relation, User: tu.User}
		if tu.Condition != nil {
			k.Condition = &openfgav1.RelationshipCondition{Name: tu.Condition.Name, Context: mustStruct(tu.Condition.Context)}
		}
		keys = append(keys, k)
	}
	return keys
}

// userFilters turns the suite's filters ("user", "group#member") into the API's.
func userFilters(filters []string) []*openfgav1.UserTypeFilter {
	out := make([]*openfgav1.UserTypeFilter, 0, len(filters))
	for _, f := range filters {
		typ, relation, _ := strings.Cut(f, "#")
		out = append(out, &openfgav1.UserTypeFilter{Type: typ, Relation: relation})
	}
	return out
}

// UserString renders a ListUsers user as the suite writes it: "user:anne",
// "group:eng#member" or "user:*".
func UserString(u *openfgav1.User) string {
	switch {
	case u.GetObject() != nil:
		return u.GetObject().GetType() + ":" + u.GetObject().GetId()
	case u.GetUserset() != nil:
		us := u.GetUserset()
		return us.GetType() + ":" + us.GetId() + "#" + us.GetRelation()
	case u.GetWildcard() != nil:
		return u.GetWildcard().GetType() + ":*"
	}
	return ""
}

// mustStruct converts a YAML context to a protobuf Struct; nil stays nil, so a request
// without a context sends none.
func mustStruct(m map[string]any) *structpb.Struct {
	if m == nil {
		return nil
	}
	s, err := structpb.NewStruct(m)
	if err != nil {
		panic(fmt.Sprintf("fgatest: context %v is not JSON-shaped: %v", m, err))
	}
	return s
}

// LoadConformance reads OpenFGA's suite from ../shared/conformance/openfga beside the
// module root. The test is skipped when it is missing, unless in CI (CI=true), where
// that is a failure.
func LoadConformance(t testing.TB) []*Suite {
	t.Helper()
	dir := filepath.Join(ModuleRoot(t), "..", "shared", "conformance", "openfga")
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is missing; CI must have ../shared beside the repository", dir)
		}
		t.Skipf("%s is missing (../shared is not beside the repository); skipping", dir)
	}
	var suites []*Suite
	for _, name := range []string{"consolidated_1_1_tests.yaml", "abac_tests.yaml"} {
		s, err := LoadSuite(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		suites = append(suites, s)
	}
	return suites
}

// ModuleRoot is the directory of go.mod above the test's.
func ModuleRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}
