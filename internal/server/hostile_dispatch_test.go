package server

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	v1 "github.com/authzed/authzed-go/proto/authzed/api/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/latch-authz/latch/internal/store/memory"
)

// The hostile-input rows of the cluster's dispatch listener: a node in cluster mode
// (a cluster of one, over a memory store shared with nothing) is sent dispatches a
// hostile or broken peer could send. The frames are written here byte by byte, as such
// a peer would, not with the cluster's own encoder.

const (
	dispatchCheck         = "/latch.cluster.v1.Dispatch/Check"
	dispatchHealth        = "/latch.cluster.v1.Dispatch/Health"
	dispatchKey           = "cluster-key"
	dispatchConcurrency   = 4
	dispatchFloodRequests = 16 * dispatchConcurrency
)

// rawFrames is a gRPC codec that sends and receives a dispatch message as its bytes.
type rawFrames struct{}

func (rawFrames) Name() string { return "latch-dispatch" }

func (rawFrames) Marshal(v any) ([]byte, error) { return *v.(*[]byte), nil }

func (rawFrames) Unmarshal(data []byte, v any) error {
	*v.(*[]byte) = append([]byte(nil), data...)
	return nil
}

// dispatchFrame is a Check request's fields, in the wire's order: revision, resource
// type, relation, subject type, id and relation, caveat context, depth, resource ids.
type dispatchFrame struct {
	revision                                               uint64
	resourceType, relation, subjectType, subjectID, subRel string
	context                                                string
	depth                                                  uint64
	ids                                                    []string
}

func (f dispatchFrame) bytes() []byte {
	str := func(b []byte, s string) []byte { return append(binary.AppendUvarint(b, uint64(len(s))), s...) }
	b := binary.AppendUvarint(nil, f.revision)
	for _, s := range []string{f.resourceType, f.relation, f.subjectType, f.subjectID, f.subRel, f.context} {
		b = str(b, s)
	}
	b = binary.AppendUvarint(b, f.depth)
	b = binary.AppendUvarint(b, uint64(len(f.ids)))
	for _, id := range f.ids {
		b = str(b, id)
	}
	return b
}

// dispatchTestServer is a node in cluster mode whose dispatch listener is ts.srv.ClusterAddr().
func dispatchTestServer(t *testing.T) *testServer {
	st := memory.New(memory.Options{})
	t.Cleanup(func() { _ = st.Close() })
	addr := freeAddrs(t, 1)[0]
	ts := start(t, func(c *Config) {
		c.Datastore = st
		c.Cluster = ClusterConfig{Enabled: true, Addr: addr, Upstream: "static:///" + addr, PresharedKey: dispatchKey, ConcurrencyLimit: dispatchConcurrency}
	})
	ts.writeSchema(t, hostileZedBase+"viewer\n}")
	ts.write(t, relationship("document", "1", "viewer", "user", "alice", ""))
	return ts
}

// dispatch sends one raw Check (or other method) to ts's dispatch listener with key
// and returns "<code> <message>".
func dispatch(t *testing.T, ts *testServer, method, key string, req []byte) string {
	t.Helper()
	opts := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithDefaultCallOptions(grpc.ForceCodec(rawFrames{}))}
	if key != "" {
		opts = append(opts, grpc.WithPerRPCCredentials(bearer(key)))
	}
	conn, err := grpc.NewClient(ts.srv.ClusterAddr(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var resp []byte
	err = conn.Invoke(ctxT(t), method, &req, &resp)
	st, _ := status.FromError(err)
	return st.Code().String() + " " + st.Message()
}

// head is the store's newest revision, where a valid dispatch reads.
func head(t *testing.T, ts *testServer) uint64 {
	t.Helper()
	rev, err := ts.srv.store.HeadRevision(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	return uint64(rev)
}

// validDispatch is a dispatch a peer would send: does alice view document 1?
func validDispatch(t *testing.T, ts *testServer) dispatchFrame {
	return dispatchFrame{revision: head(t, ts), resourceType: "document", relation: "view", subjectType: "user", subjectID: "alice", depth: 10, ids: []string{"1"}}
}

func TestHostileDispatchInputs(t *testing.T) {
	ts := dispatchTestServer(t)
	base := heapInUse()
	send := func(key string, edit func(*dispatchFrame)) func(*testing.T, *testServer) string {
		return func(t *testing.T, ts *testServer) string {
			f := validDispatch(t, ts)
			edit(&f)
			return dispatch(t, ts, dispatchCheck, key, f.bytes())
		}
	}
	raw := func(method, key string, frame func(valid []byte) []byte) func(*testing.T, *testServer) string {
		return func(t *testing.T, ts *testServer) string {
			return dispatch(t, ts, method, key, frame(validDispatch(t, ts).bytes()))
		}
	}
	same := func(*dispatchFrame) {}
	many := make([]string, 100_000)
	for i := range many {
		many[i] = fmt.Sprint(i)
	}
	rows := []hostileRow{
		{"dispatch", "a valid dispatch", send(dispatchKey, same), "OK"},
		{"dispatch", "no key", send("", same), "Unauthenticated"},
		{"dispatch", "a wrong key", send("not-the-key", same), "Unauthenticated"},
		{"dispatch", "a wrong key of the right length", send(strings.Repeat("x", len(dispatchKey)), same), "Unauthenticated"},
		{"dispatch", "the API's key", send(testKey, same), "Unauthenticated"},
		{"dispatch", "a health probe with no key", raw(dispatchHealth, "", func([]byte) []byte { return nil }), "Unauthenticated"},
		{"dispatch", "a health probe with the key", raw(dispatchHealth, dispatchKey, func([]byte) []byte { return nil }), "OK"},
		{"dispatch", "an unknown method", raw("/latch.cluster.v1.Dispatch/Drop", dispatchKey, func(b []byte) []byte { return b }), "Unimplemented"},
		{"dispatch", "an empty frame", raw(dispatchCheck, dispatchKey, func([]byte) []byte { return nil }), "InvalidArgument"},
		{"dispatch", "a garbage frame", raw(dispatchCheck, dispatchKey, func([]byte) []byte { return []byte("\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xffgarbage") }), "InvalidArgument"},
		{"dispatch", "a truncated frame", raw(dispatchCheck, dispatchKey, func(b []byte) []byte { return b[:len(b)-1] }), "InvalidArgument"},
		{"dispatch", "bytes past the frame's end", raw(dispatchCheck, dispatchKey, func(b []byte) []byte { return append(b, 0) }), "InvalidArgument"},
		{"dispatch", "a string claiming 2^62 bytes", raw(dispatchCheck, dispatchKey, func(b []byte) []byte {
			return binary.AppendUvarint(binary.AppendUvarint(nil, 1), 1<<62)
		}), "InvalidArgument"},
		{"dispatch", "an id count claiming 2^40 ids", raw(dispatchCheck, dispatchKey, func(b []byte) []byte {
			f := dispatchFrame{resourceType: "document", relation: "view", subjectType: "user", subjectID: "alice"}
			enc := f.bytes()
			return binary.AppendUvarint(enc[:len(enc)-1], 1<<40)
		}), "InvalidArgument"},
		{"dispatch", "a frame past the gRPC message limit", raw(dispatchCheck, dispatchKey, func([]byte) []byte { return make([]byte, 5<<20) }), "ResourceExhausted"},
		{"dispatch", "100,000 resource ids", send(dispatchKey, func(f *dispatchFrame) { f.ids = many }), "OK"},
		{"dispatch", "no resource ids", send(dispatchKey, func(f *dispatchFrame) { f.ids = nil }), "OK"},
		{"dispatch", "a 1 MB resource id", send(dispatchKey, func(f *dispatchFrame) { f.ids = []string{strings.Repeat("a", 1<<20)} }), "InvalidArgument"},
		{"dispatch", "a resource id in invalid UTF-8", send(dispatchKey, func(f *dispatchFrame) { f.ids = []string{"doc\xff\xfe"} }), "InvalidArgument"},
		{"dispatch", "an empty resource id", send(dispatchKey, func(f *dispatchFrame) { f.ids = []string{""} }), "InvalidArgument"},
		{"dispatch", "a 1 MB subject id", send(dispatchKey, func(f *dispatchFrame) { f.subjectID = strings.Repeat("a", 1<<20) }), "InvalidArgument"},
		{"dispatch", "a subject type in invalid UTF-8", send(dispatchKey, func(f *dispatchFrame) { f.subjectType = "us\xffer" }), "InvalidArgument"},
		{"dispatch", "an unknown definition", send(dispatchKey, func(f *dispatchFrame) { f.resourceType = "folder" }), "InvalidArgument"},
		{"dispatch", "an unknown relation", send(dispatchKey, func(f *dispatchFrame) { f.relation = "edit" }), "InvalidArgument"},
		{"dispatch", "a revision from the future", send(dispatchKey, func(f *dispatchFrame) { f.revision += 1 << 40 }), "OutOfRange dispatch: revision is newer than the store's head revision"},
		{"dispatch", "revision 2^64-1", send(dispatchKey, func(f *dispatchFrame) { f.revision = 1<<64 - 1 }), "OutOfRange"},
		{"dispatch", "depth 0", send(dispatchKey, func(f *dispatchFrame) { f.depth = 0 }), "OK"},
		{"dispatch", "a depth past the node's limit", send(dispatchKey, func(f *dispatchFrame) { f.depth = 1 << 20 }), "InvalidArgument"},
		{"dispatch", "depth 2^64-1 (-1 as a signed number)", send(dispatchKey, func(f *dispatchFrame) { f.depth = 1<<64 - 1 }), "InvalidArgument"},
		{"dispatch", "a caveat context that is not JSON", send(dispatchKey, func(f *dispatchFrame) { f.context = "{not json" }), "InvalidArgument"},
		{"dispatch", "a caveat context nested 100,000 deep", send(dispatchKey, func(f *dispatchFrame) {
			f.context = `{"a":` + strings.Repeat("[", 100_000) + strings.Repeat("]", 100_000) + "}"
		}), "InvalidArgument"},
		{"dispatch", fmt.Sprintf("%d concurrent dispatches past a limit of %d", dispatchFloodRequests, dispatchConcurrency), dispatchFlood, "OK"},
	}
	for _, r := range rows {
		t.Run(r.listener+"/"+r.name, func(t *testing.T) {
			if got := r.send(t, ts); got != r.want && !strings.HasPrefix(got, r.want+" ") {
				t.Errorf("answered %q, want %q", clipAnswer(got), r.want)
			}
		})
	}
	// The node survived: it answers a dispatch and a check.
	f := validDispatch(t, ts)
	if got := dispatch(t, ts, dispatchCheck, dispatchKey, f.bytes()); got != "OK " {
		t.Fatalf("after the hostile dispatches a valid one answers %q", got)
	}
	resp, err := ts.check(t, fullyConsistent(), obj("document", "1"), "view", sub("user", "alice", ""))
	if err != nil || resp.GetPermissionship() != v1.CheckPermissionResponse_PERMISSIONSHIP_HAS_PERMISSION {
		t.Fatalf("after the hostile dispatches a check answers %v, %v", resp, err)
	}
	if after := heapInUse(); after > base+hostileHeapSlack {
		t.Errorf("live heap %d MB after the suite, %d MB before: more than %d MB was kept", after>>20, base>>20, hostileHeapSlack>>20)
	} else {
		t.Logf("live heap %d MB after the suite, %d MB before", after>>20, base>>20)
	}
}

// dispatchFlood sends many dispatches at once on one connection, several times the
// node's concurrency limit: each is answered, none refused or failed.
func dispatchFlood(t *testing.T, ts *testServer) string {
	conn, err := grpc.NewClient(ts.srv.ClusterAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.ForceCodec(rawFrames{})), grpc.WithPerRPCCredentials(bearer(dispatchKey)))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	f := validDispatch(t, ts)
	var wg sync.WaitGroup
	errs := make([]error, dispatchFloodRequests)
	for i := range dispatchFloodRequests {
		wg.Go(func() {
			g := f
			g.ids = []string{fmt.Sprint(i)} // distinct requests: none joins another's answer
			req, resp := g.bytes(), []byte(nil)
			errs[i] = conn.Invoke(ctxT(t), dispatchCheck, &req, &resp)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		st, _ := status.FromError(err)
		return st.Code().String() + " " + st.Message()
	}
	return codes.OK.String()
}
