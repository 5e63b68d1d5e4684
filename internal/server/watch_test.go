package server

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	v1 "github.com/authzed/authzed-go/proto/authzed/api/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/relv1"
	"github.com/latch-authz/latch/internal/server/zedtoken"
)

const watchSchema = `
caveat only_on(day int) { day == 3 }
definition user {}
definition group { relation member: user }
definition document {
	relation viewer: user | user with only_on | group#member
	relation editor: user
}`

func setVar[T any](t *testing.T, p *T, v T) {
	old := *p
	*p = v
	t.Cleanup(func() { *p = old })
}

// watchText renders a response as "@token OP rel, OP rel [schema] [checkpoint]".
func watchText(r *v1.WatchResponse) string {
	parts := []string{"@" + r.GetChangesThrough().GetToken()}
	for _, u := range r.GetUpdates() {
		op := strings.TrimPrefix(u.GetOperation().String(), "OPERATION_")
		parts = append(parts, op+" "+rel.String(relv1.FromRelationship(u.GetRelationship())))
	}
	if r.GetSchemaUpdated() {
		parts = append(parts, "schema")
	}
	if r.GetIsCheckpoint() {
		parts = append(parts, "checkpoint")
	}
	return strings.Join(parts, " ")
}

func (ts *testServer) watch(ctx context.Context, t *testing.T, req *v1.WatchRequest) v1.WatchService_WatchClient {
	t.Helper()
	stream, err := v1.NewWatchServiceClient(ts.conn).Watch(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	return stream
}

// recvN receives n responses as text.
func recvN(t *testing.T, stream v1.WatchService_WatchClient, n int) []string {
	t.Helper()
	var out []string
	for range n {
		r, err := stream.Recv()
		if err != nil {
			t.Fatalf("watch: after %q: %v", out, err)
		}
		out = append(out, watchText(r))
	}
	return out
}

// A watcher sees every write, touch, delete, filtered delete and schema change
// through the API exactly once, in order, each at the token its write returned;
// resuming from a token yields exactly the later changes; filters select.
func TestWatchThroughAPI(t *testing.T) {
	ts := start(t, nil)
	ctx := ctxT(t)
	startTok := ts.writeSchema(t, watchSchema)
	all := ts.watch(ctx, t, &v1.WatchRequest{
		OptionalStartCursor: startTok,
		// Only schema updates are asked for: relationship updates come regardless, as on SpiceDB.
		OptionalUpdateKinds: []v1.WatchKind{v1.WatchKind_WATCH_KIND_INCLUDE_SCHEMA_UPDATES},
	})
	groups := ts.watch(ctx, t, &v1.WatchRequest{OptionalStartCursor: startTok, OptionalObjectTypes: []string{"group"}})
	editors := ts.watch(ctx, t, &v1.WatchRequest{
		OptionalStartCursor:         startTok,
		OptionalRelationshipFilters: []*v1.RelationshipFilter{{ResourceType: "document", OptionalRelation: "editor"}},
	})

	a := relationship("document", "1", "viewer", "user", "a", "")
	g := relationship("group", "eng", "member", "user", "a", "")
	e := relationship("document", "1", "editor", "user", "b", "")
	aCav := relationship("document", "1", "viewer", "user", "a", "")
	aCav.OptionalCaveat = &v1.ContextualizedCaveat{CaveatName: "only_on", Context: mustStruct(t, map[string]any{"day": 3})}
	write := func(us ...*v1.RelationshipUpdate) string {
		resp, err := ts.perms.WriteRelationships(ctx, &v1.WriteRelationshipsRequest{Updates: us})
		if err != nil {
			t.Fatal(err)
		}
		return resp.GetWrittenAt().GetToken()
	}
	t1 := write(update(v1.RelationshipUpdate_OPERATION_CREATE, a), update(v1.RelationshipUpdate_OPERATION_CREATE, g), update(v1.RelationshipUpdate_OPERATION_TOUCH, e))
	t2 := write(update(v1.RelationshipUpdate_OPERATION_TOUCH, aCav))
	t3 := write(update(v1.RelationshipUpdate_OPERATION_DELETE, g))
	del, err := ts.perms.DeleteRelationships(ctx, &v1.DeleteRelationshipsRequest{RelationshipFilter: &v1.RelationshipFilter{ResourceType: "document"}})
	if err != nil {
		t.Fatal(err)
	}
	t4 := del.GetDeletedAt().GetToken()
	t5 := ts.writeSchema(t, watchSchema+"\ndefinition folder {}").GetToken()

	want := []string{
		"@" + t1 + " TOUCH document:1#editor@user:b TOUCH document:1#viewer@user:a TOUCH group:eng#member@user:a",
		"@" + t2 + ` TOUCH document:1#viewer@user:a[only_on:{"day":3}]`,
		"@" + t3 + " DELETE group:eng#member@user:a",
		"@" + t4 + ` DELETE document:1#editor@user:b DELETE document:1#viewer@user:a[only_on:{"day":3}]`,
		"@" + t5 + " schema",
	}
	if got := recvN(t, all, len(want)); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("watch:\n got  %s\n want %s", strings.Join(got, "\n      "), strings.Join(want, "\n      "))
	}
	wantGroups := []string{"@" + t1 + " TOUCH group:eng#member@user:a", "@" + t3 + " DELETE group:eng#member@user:a"}
	if got := recvN(t, groups, 2); strings.Join(got, "\n") != strings.Join(wantGroups, "\n") {
		t.Fatalf("watch of groups: got %q, want %q", got, wantGroups)
	}
	wantEditors := []string{"@" + t1 + " TOUCH document:1#editor@user:b", "@" + t4 + " DELETE document:1#editor@user:b"}
	if got := recvN(t, editors, 2); strings.Join(got, "\n") != strings.Join(wantEditors, "\n") {
		t.Fatalf("watch of editors: got %q, want %q", got, wantEditors)
	}

	resumed := ts.watch(ctx, t, &v1.WatchRequest{OptionalStartCursor: &v1.ZedToken{Token: t2}})
	wantResumed := []string{want[2], want[3]} // relationship updates only: no schema response
	if got := recvN(t, resumed, 2); strings.Join(got, "\n") != strings.Join(wantResumed, "\n") {
		t.Fatalf("resumed watch: got %q, want %q", got, wantResumed)
	}
}

// An idle watch that asks for checkpoints gets them, at the head; one started
// without a cursor starts at the head and sees later writes, relationship updates
// included though only checkpoints were asked for.
func TestWatchCheckpoints(t *testing.T) {
	setVar(t, &watchCheckpointInterval, 20*time.Millisecond)
	ts := start(t, nil)
	ctx := ctxT(t)
	head := ts.writeSchema(t, watchSchema).GetToken()
	stream := ts.watch(ctx, t, &v1.WatchRequest{OptionalUpdateKinds: []v1.WatchKind{v1.WatchKind_WATCH_KIND_INCLUDE_CHECKPOINTS}})
	if got := recvN(t, stream, 1)[0]; got != "@"+head+" checkpoint" {
		t.Fatalf("first response %q, want a checkpoint at %s", got, head)
	}
	tok := ts.write(t, relationship("document", "2", "viewer", "user", "c", "")).GetToken()
	for {
		got := recvN(t, stream, 1)[0]
		if strings.HasSuffix(got, " checkpoint") {
			continue
		}
		if want := "@" + tok + " TOUCH document:2#viewer@user:c"; got != want {
			t.Fatalf("got %q, want %q", got, want)
		}
		break
	}
}

// A client that stops reading does not slow writers; once the buffer has waited long
// enough it is cut off with RESOURCE_EXHAUSTED, after receiving, in order, what was
// sent before.
func TestWatchLaggingClientIsDisconnected(t *testing.T) {
	setVar(t, &watchBufferSize, 4)
	setVar(t, &watchBufferTimeout, 200*time.Millisecond)
	ts := start(t, nil)
	ctx := ctxT(t)
	tok := ts.writeSchema(t, watchSchema)
	// Fixed flow-control windows, so that what gRPC itself buffers stays small.
	conn, err := grpc.NewClient(ts.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithPerRPCCredentials(bearer(testKey)),
		grpc.WithInitialWindowSize(1<<16), grpc.WithInitialConnWindowSize(1<<16))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	stream, err := v1.NewWatchServiceClient(conn).Watch(ctx, &v1.WatchRequest{OptionalStartCursor: tok})
	if err != nil {
		t.Fatal(err)
	}
	const writes, perWrite = 100, 50
	began := time.Now()
	for i := range writes {
		var us []*v1.RelationshipUpdate
		for j := range perWrite {
			id := fmt.Sprintf("%d-%d-%s", i, j, strings.Repeat("x", 100))
			us = append(us, update(v1.RelationshipUpdate_OPERATION_TOUCH, relationship("document", id, "viewer", "user", "u", "")))
		}
		if _, err := ts.perms.WriteRelationships(ctx, &v1.WriteRelationshipsRequest{Updates: us}); err != nil {
			t.Fatal(err)
		}
	}
	if d := time.Since(began); d > 8*time.Second {
		t.Fatalf("%d writes took %v while a watcher was not reading", writes, d)
	}
	time.Sleep(2 * watchBufferTimeout)
	received := 0
	for {
		r, err := stream.Recv()
		if err != nil {
			st := wantCode(t, err, codes.ResourceExhausted, v1.ErrorReason_ERROR_REASON_UNSPECIFIED)
			if !strings.Contains(st.Message(), "resume from the last revision received") {
				t.Fatalf("lagging error %q does not say how to resume", st.Message())
			}
			break
		}
		if first := r.GetUpdates()[0].GetRelationship().GetResource().GetObjectId(); !strings.HasPrefix(first, fmt.Sprintf("%d-0-", received)) {
			t.Fatalf("response %d starts with %s: out of order", received, first)
		}
		received++
	}
	t.Logf("received %d of %d responses before the disconnect", received, writes)
	if received == 0 || received >= writes {
		t.Fatalf("received %d of %d responses before the disconnect, want some but not all", received, writes)
	}
}

// A start cursor older than the GC window is refused with OUT_OF_RANGE.
func TestWatchFromCollectedRevision(t *testing.T) {
	ts := start(t, func(c *Config) { c.GCWindow = 50 * time.Millisecond })
	ctx := ctxT(t)
	old := ts.writeSchema(t, watchSchema)
	ts.write(t, relationship("document", "1", "viewer", "user", "a", ""))
	time.Sleep(100 * time.Millisecond)
	_, err := ts.watch(ctx, t, &v1.WatchRequest{OptionalStartCursor: old}).Recv()
	st := wantCode(t, err, codes.OutOfRange, v1.ErrorReason_ERROR_REASON_UNSPECIFIED)
	if !strings.Contains(st.Message(), "garbage collection window") {
		t.Fatalf("message %q does not say the revision was collected", st.Message())
	}
}

// Object types and relationship filters together are refused, as SpiceDB refuses them
// (INVALID_ARGUMENT without a reason); a filter naming an unknown type is refused as
// SpiceDB refuses it.
func TestWatchRequestErrors(t *testing.T) {
	ts := start(t, nil)
	ctx := ctxT(t)
	_, err := ts.watch(ctx, t, &v1.WatchRequest{
		OptionalObjectTypes:         []string{"document"},
		OptionalRelationshipFilters: []*v1.RelationshipFilter{{ResourceType: "document"}},
	}).Recv()
	st := wantCode(t, err, codes.InvalidArgument, v1.ErrorReason_ERROR_REASON_UNSPECIFIED)
	if st.Message() != "cannot specify both object types and relationship filters" {
		t.Errorf("message %q", st.Message())
	}
	ts.writeSchema(t, "definition user {}")
	_, err = ts.watch(ctx, t, &v1.WatchRequest{OptionalRelationshipFilters: []*v1.RelationshipFilter{{ResourceType: "nope"}}}).Recv()
	wantCode(t, err, codes.FailedPrecondition, v1.ErrorReason_ERROR_REASON_UNKNOWN_DEFINITION)
}

// The gateway serves watch on SpiceDB's path as a stream of JSON lines.
func TestWatchThroughGateway(t *testing.T) {
	ts := start(t, nil)
	tok := ts.writeSchema(t, watchSchema).GetToken()
	written := ts.write(t, relationship("document", "1", "viewer", "user", "a", "")).GetToken()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	body := `{"optional_start_cursor": {"token": "` + tok + `"}}`
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+ts.httpAddr+"/v1/watch", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil {
		t.Fatalf("reading the first watch line (status %d): %v", resp.StatusCode, err)
	}
	var got struct {
		Result struct {
			Updates []struct {
				Operation    string `json:"operation"`
				Relationship struct {
					Resource struct {
						ObjectID string `json:"objectId"`
					} `json:"resource"`
				} `json:"relationship"`
			} `json:"updates"`
			ChangesThrough struct {
				Token string `json:"token"`
			} `json:"changesThrough"`
		} `json:"result"`
	}
	if err := json.Unmarshal([]byte(line), &got); err != nil {
		t.Fatalf("watch line %q: %v", line, err)
	}
	r := got.Result
	if len(r.Updates) != 1 || r.Updates[0].Operation != "OPERATION_TOUCH" || r.Updates[0].Relationship.Resource.ObjectID != "1" || r.ChangesThrough.Token != written {
		t.Fatalf("watch line %s: want one TOUCH of document:1 through %s", line, written)
	}
}

// A watch without a start cursor starts at the head revision, as the API documents
// ("the watch will start from the current SpiceDB revision time of the request"):
// a write committed before the watch opened is not delivered, one after it is.
// (SpiceDB 1.56 starts at its quantized revision and may replay the last seconds'
// writes; issue 30, item 5.) The stream is read until the later write or a
// checkpoint past it, whichever the watch's start allows.
func TestWatchWithoutCursorStartsAtHead(t *testing.T) {
	ts := start(t, func(c *Config) { c.QuantizationWindow = time.Hour })
	ts.writeSchema(t, "definition user {}\ndefinition doc { relation viewer: user }")
	ts.write(t, relationship("doc", "before", "viewer", "user", "u", ""))
	ctx := ctxT(t)
	stream := ts.watch(ctx, t, &v1.WatchRequest{OptionalUpdateKinds: []v1.WatchKind{v1.WatchKind_WATCH_KIND_INCLUDE_CHECKPOINTS}})
	after := ts.write(t, relationship("doc", "after", "viewer", "user", "u", ""))
	afterRev, err := zedtoken.Decode(after.GetToken())
	if err != nil {
		t.Fatal(err)
	}
	for {
		resp, err := stream.Recv()
		if err != nil {
			t.Fatalf("watch ended before the later write or a checkpoint past it: %v", err)
		}
		for _, u := range resp.GetUpdates() {
			switch u.GetRelationship().GetResource().GetObjectId() {
			case "before":
				t.Fatal("the watch delivered a write committed before it opened")
			case "after":
				return
			}
		}
		if rev, err := zedtoken.Decode(resp.GetChangesThrough().GetToken()); err == nil && resp.GetIsCheckpoint() && rev >= afterRev {
			return
		}
	}
}

// TestWatchStreamsBounded: past --max-watch-streams a Watch is refused with
// RESOURCE_EXHAUSTED; once a stream closes, a new one is served, and the open streams
// share the store's one watch.
func TestWatchStreamsBounded(t *testing.T) {
	ts := start(t, func(c *Config) { c.MaxWatchStreams = 2 })
	ts.writeSchema(t, watchSchema)
	first, cancelFirst := context.WithCancel(ctxT(t))
	ts.watch(first, t, &v1.WatchRequest{})
	second := ts.watch(ctxT(t), t, &v1.WatchRequest{})
	for len(ts.srv.watchSlots) < 2 {
		time.Sleep(time.Millisecond)
	}
	_, err := ts.watch(ctxT(t), t, &v1.WatchRequest{}).Recv()
	if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "--max-watch-streams") {
		t.Fatalf("a third watch with --max-watch-streams 2: %v, want RESOURCE_EXHAUSTED naming the flag", err)
	}
	cancelFirst()
	for len(ts.srv.watchSlots) > 1 {
		time.Sleep(time.Millisecond)
	}
	third := ts.watch(ctxT(t), t, &v1.WatchRequest{})
	for len(ts.srv.watchSlots) < 2 {
		time.Sleep(time.Millisecond)
	}
	tok := ts.write(t, relationship("document", "1", "viewer", "user", "a", "")).GetToken()
	want := "@" + tok + " TOUCH document:1#viewer@user:a"
	for _, s := range []v1.WatchService_WatchClient{second, third} {
		if got := recvN(t, s, 1)[0]; got != want {
			t.Fatalf("a watch within the bound got %q, want %q", got, want)
		}
	}
}
