package server

import (
	"strings"
	"testing"
	"time"

	v1 "github.com/authzed/authzed-go/proto/authzed/api/v1"
	"google.golang.org/grpc/codes"
)

func minimizeLatency() *v1.Consistency {
	return &v1.Consistency{Requirement: &v1.Consistency_MinimizeLatency{MinimizeLatency: true}}
}

func TestQuantizedReads(t *testing.T) {
	ts := start(t, func(c *Config) { c.QuantizationWindow, c.MaxStalenessPercent = time.Hour, -1 })
	ts.writeSchema(t, docSchema)
	granted := ts.write(t, relationship("document", "readme", "owner", "user", "zed", ""))
	view := func(c *v1.Consistency) *v1.CheckPermissionResponse {
		t.Helper()
		resp, err := ts.check(t, c, obj("document", "readme"), "view", sub("user", "zed", ""))
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	if got := view(minimizeLatency()); got.Permissionship != v1.CheckPermissionResponse_PERMISSIONSHIP_HAS_PERMISSION || got.CheckedAt.Token != granted.Token {
		t.Fatalf("first minimize_latency read of the window: %v, want the head at %s", got, granted.Token)
	}
	del, err := ts.perms.DeleteRelationships(ctxT(t), &v1.DeleteRelationshipsRequest{
		RelationshipFilter: &v1.RelationshipFilter{ResourceType: "document", OptionalResourceId: "readme"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := view(minimizeLatency()); got.CheckedAt.Token != granted.Token {
		t.Errorf("minimize_latency within the window read %s, want the window's revision %s", got.CheckedAt.Token, granted.Token)
	}
	atLeast := &v1.Consistency{Requirement: &v1.Consistency_AtLeastAsFresh{AtLeastAsFresh: del.DeletedAt}}
	if got := view(atLeast); got.Permissionship != v1.CheckPermissionResponse_PERMISSIONSHIP_NO_PERMISSION || got.CheckedAt.Token != del.DeletedAt.Token {
		t.Errorf("at_least_as_fresh the delete: %v", got)
	}
	if got := view(fullyConsistent()); got.Permissionship != v1.CheckPermissionResponse_PERMISSIONSHIP_NO_PERMISSION {
		t.Errorf("fully_consistent after the delete: %v", got)
	}
}

func TestQuantizedReadsMoveOn(t *testing.T) {
	ts := start(t, func(c *Config) { c.QuantizationWindow = 20 * time.Millisecond })
	ts.writeSchema(t, docSchema)
	ts.write(t, relationship("document", "readme", "owner", "user", "zed", ""))
	deadline := time.Now().Add(5 * time.Second)
	for {
		resp, err := ts.check(t, minimizeLatency(), obj("document", "readme"), "view", sub("user", "zed", ""))
		if err != nil {
			t.Fatal(err)
		}
		if resp.Permissionship == v1.CheckPermissionResponse_PERMISSIONSHIP_HAS_PERMISSION {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("minimize_latency reads never saw the write")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestAtLeastAsFreshSeesEveryWrite: with the default window and the answer cache on,
// a check at least as fresh as a write's token reflects that write, every time, while
// the minimize_latency reads in between may lag.
func TestAtLeastAsFreshSeesEveryWrite(t *testing.T) {
	ts := start(t, nil)
	ts.writeSchema(t, docSchema)
	r := relationship("document", "readme", "viewer", "user", "amy", "")
	for i := range 30 {
		var tok *v1.ZedToken
		want := v1.CheckPermissionResponse_PERMISSIONSHIP_HAS_PERMISSION
		if i%2 == 0 {
			tok = ts.write(t, r)
		} else {
			resp, err := ts.perms.WriteRelationships(ctxT(t), &v1.WriteRelationshipsRequest{
				Updates: []*v1.RelationshipUpdate{update(v1.RelationshipUpdate_OPERATION_DELETE, r)},
			})
			if err != nil {
				t.Fatal(err)
			}
			tok, want = resp.WrittenAt, v1.CheckPermissionResponse_PERMISSIONSHIP_NO_PERMISSION
		}
		if _, err := ts.check(t, minimizeLatency(), obj("document", "readme"), "view", sub("user", "amy", "")); err != nil {
			t.Fatal(err) // fills the cache at the window's revision
		}
		atLeast := &v1.Consistency{Requirement: &v1.Consistency_AtLeastAsFresh{AtLeastAsFresh: tok}}
		resp, err := ts.check(t, atLeast, obj("document", "readme"), "view", sub("user", "amy", ""))
		if err != nil || resp.Permissionship != want {
			t.Fatalf("write %d: at_least_as_fresh its token: %v, %v; want %v", i, resp, err, want)
		}
	}
}

// ZedTokens SpiceDB issued (issue 30, item 3): at_least_as_fresh with one reads at the
// head, so a write just made is seen even with a quantization window far longer than
// the test; at_exact_snapshot and a watch from one are refused with
// FAILED_PRECONDITION naming the reason; garbage is still INVALID_ARGUMENT.
func TestSpiceDBTokens(t *testing.T) {
	ts := start(t, func(c *Config) { c.QuantizationWindow = time.Hour })
	ts.writeSchema(t, "definition user {}\ndefinition doc { relation viewer: user\n permission view = viewer }")
	ts.write(t, relationship("doc", "d1", "viewer", "user", "anne", ""))
	// A token in the form SpiceDB v1.56 issues: its revision and its datastore's id prefix.
	const spicedbToken = "Gh8KEzE3OTU3Mzg4MDk4NjUwNzY5MjgSCGFlN2ZkNjE5"
	resp, err := ts.check(t, &v1.Consistency{Requirement: &v1.Consistency_AtLeastAsFresh{AtLeastAsFresh: &v1.ZedToken{Token: spicedbToken}}},
		obj("doc", "d1"), "view", sub("user", "anne", ""))
	if err != nil || resp.GetPermissionship() != v1.CheckPermissionResponse_PERMISSIONSHIP_HAS_PERMISSION {
		t.Fatalf("at_least_as_fresh with a SpiceDB token: %v, %v", resp, err)
	}
	_, err = ts.check(t, &v1.Consistency{Requirement: &v1.Consistency_AtExactSnapshot{AtExactSnapshot: &v1.ZedToken{Token: spicedbToken}}},
		obj("doc", "d1"), "view", sub("user", "anne", ""))
	st := wantCode(t, err, codes.FailedPrecondition, v1.ErrorReason_ERROR_REASON_UNSPECIFIED)
	if !strings.Contains(st.Message(), "issued by SpiceDB") || !strings.Contains(st.Message(), "1795738809865076928") {
		t.Errorf("at_exact_snapshot message %q does not name the reason and the revision", st.Message())
	}
	stream, err := v1.NewWatchServiceClient(ts.conn).Watch(ctxT(t), &v1.WatchRequest{OptionalStartCursor: &v1.ZedToken{Token: spicedbToken}})
	if err == nil {
		_, err = stream.Recv()
	}
	wantCode(t, err, codes.FailedPrecondition, v1.ErrorReason_ERROR_REASON_UNSPECIFIED)
	_, err = ts.check(t, &v1.Consistency{Requirement: &v1.Consistency_AtLeastAsFresh{AtLeastAsFresh: &v1.ZedToken{Token: "bm90IGEgdG9rZW4="}}},
		obj("doc", "d1"), "view", sub("user", "anne", ""))
	wantCode(t, err, codes.InvalidArgument, v1.ErrorReason_ERROR_REASON_UNSPECIFIED)
}
