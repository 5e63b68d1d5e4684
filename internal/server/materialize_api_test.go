package server

import (
	"errors"
	"io"
	"maps"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/RoaringBitmap/roaring/v2/roaring64"
	mv0 "github.com/authzed/authzed-go/proto/authzed/api/materialize/v0"
	v1 "github.com/authzed/authzed-go/proto/authzed/api/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/latch-authz/latch/internal/materialize"
	"github.com/latch-authz/latch/internal/store/postgres"
	"github.com/latch-authz/latch/internal/store/postgres/pgtest"
)

const materializeSchema = `
definition user {}
definition group {
	relation member: user | group#member
}
definition folder {
	relation parent: folder
	relation viewer: user | group#member
	permission view = viewer + parent->view
}
definition document {
	relation parent: folder
	relation viewer: user | group#member
	relation editor: user
	permission edit = editor
	permission view = viewer + edit + parent->view
}`

// setRow is one stored pair, as a consumer's member_to_set / set_to_set row.
type setRow struct{ set, child string }

func rowOf(c *mv0.PermissionSetChange) setRow {
	p := c.GetParentSet()
	set := p.GetObjectType() + ":" + p.GetObjectId() + "#" + p.GetPermissionOrRelation()
	if cs := c.GetChildSet(); cs != nil {
		return setRow{set, "set " + cs.GetObjectType() + ":" + cs.GetObjectId() + "#" + cs.GetPermissionOrRelation()}
	}
	m := c.GetChildMember()
	return setRow{set, "member " + m.GetObjectType() + ":" + m.GetObjectId()}
}

// lookupSets reads the permission sets (at at, or the head when nil) in calls of limit
// pairs, each resuming from the last cursor, until a call sends fewer than limit; it
// returns the rows and the revision they are at.
func lookupSets(t *testing.T, c mv0.WatchPermissionSetsServiceClient, at *v1.ZedToken, limit uint32) (map[setRow]bool, *v1.ZedToken) {
	t.Helper()
	rows := map[setRow]bool{}
	var cursor *mv0.Cursor
	var tok *v1.ZedToken
	done := false
	for calls := 0; ; calls++ {
		if calls > 1000 {
			t.Fatal("LookupPermissionSets does not end")
		}
		req := &mv0.LookupPermissionSetsRequest{Limit: limit, OptionalAtRevision: at, OptionalStartingAfterCursor: cursor}
		stream, err := c.LookupPermissionSets(ctxT(t), req)
		if err != nil {
			t.Fatal(err)
		}
		n := uint32(0)
		for {
			resp, err := stream.Recv()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("LookupPermissionSets: %v", err)
			}
			n++
			r := rowOf(resp.GetChange())
			if rows[r] {
				t.Fatalf("%v sent twice", r)
			}
			if resp.GetChange().GetOperation() != mv0.PermissionSetChange_SET_OPERATION_ADDED {
				t.Fatalf("lookup sent %v", resp.GetChange().GetOperation())
			}
			rows[r] = true
			if done {
				t.Fatalf("%v sent after completed_members", r)
			}
			cursor, tok, done = resp.GetCursor(), resp.GetCursor().GetToken(), resp.GetCursor().GetCompletedMembers()
		}
		if n > 0 && n < limit && !done {
			t.Fatalf("a call sent %d of %d pairs, the last without completed_members", n, limit)
		}
		if n < limit {
			return rows, tok
		}
	}
}

// documentsOf joins the rows as AuthZed's documentation does: the documents whose
// view set holds the user directly or through ONE child set (the child sets streamed
// are the closure of nesting, so one hop reaches every chain).
func documentsOf(rows map[setRow]bool, user string) []string {
	direct, in := map[string]bool{}, map[string]bool{}
	for r := range rows {
		if r.child == "member user:"+user {
			direct[r.set], in[r.set] = true, true
		}
	}
	for r := range rows {
		if direct[strings.TrimPrefix(r.child, "set ")] {
			in[r.set] = true
		}
	}
	var docs []string
	for s := range in {
		if id, ok := strings.CutPrefix(s, "document:"); ok && strings.HasSuffix(id, "#view") {
			docs = append(docs, strings.TrimSuffix(id, "#view"))
		}
	}
	slices.Sort(docs)
	return docs
}

func (ts *testServer) lookupDocs(t *testing.T, user string, at *v1.ZedToken) []string {
	t.Helper()
	stream, err := ts.perms.LookupResources(ctxT(t), &v1.LookupResourcesRequest{
		Consistency:        &v1.Consistency{Requirement: &v1.Consistency_AtExactSnapshot{AtExactSnapshot: at}},
		ResourceObjectType: "document", Permission: "view", Subject: sub("user", user, ""),
	})
	if err != nil {
		t.Fatal(err)
	}
	var docs []string
	for {
		resp, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, resp.GetResourceObjectId())
	}
	slices.Sort(docs)
	return docs
}

// TestMaterializePermissionSets drives LookupPermissionSets and WatchPermissionSets
// with authzed-go's client on each store: the lookup read in small pages, the watch's
// events applied to it, equal at every completed revision to a lookup there, and the
// documentation's join of the rows equal to LookupResources at that revision.
func TestMaterializePermissionSets(t *testing.T) {
	for _, engine := range []string{"memory", "pebble", "postgres"} {
		t.Run(engine, func(t *testing.T) {
			ts := start(t, func(c *Config) {
				c.Materialize = []materialize.Target{{Resource: "document", Permission: "view", SubjectType: "user"}}
				c.DatastoreEngine = engine
				switch engine {
				case "pebble":
					c.DatastoreURI = t.TempDir()
				case "postgres":
					c.DatastoreURI = pgtest.Get(t).NewDatabase(t, "latch_migrated", postgres.Migrate)
				}
			})
			testPermissionSets(t, ts)
		})
	}
}

func testPermissionSets(t *testing.T, ts *testServer) {
	client := mv0.NewWatchPermissionSetsServiceClient(ts.conn)
	ts.writeSchema(t, materializeSchema)
	ts.write(t,
		relationship("group", "eng", "member", "user", "ann", ""),
		relationship("group", "eng", "member", "group", "infra", "member"),
		relationship("group", "infra", "member", "user", "bob", ""),
		relationship("folder", "root", "viewer", "group", "eng", "member"),
		relationship("folder", "sub", "parent", "folder", "root", ""),
		relationship("document", "d1", "parent", "folder", "sub", ""),
		relationship("document", "d2", "viewer", "user", "cat", ""),
		relationship("document", "d2", "editor", "user", "cat", ""),
		relationship("document", "d3", "editor", "user", "bob", ""),
	)
	rows, tok := lookupSets(t, client, nil, 3)
	for _, want := range []setRow{
		{"document:d1#view", "set folder:sub#view"},
		{"folder:sub#view", "set folder:root#view"},
		{"folder:root#view", "set group:eng#member"},
		{"group:eng#member", "set group:infra#member"},
		{"group:infra#member", "member user:bob"},
		// The closure: every set below a set is its child set.
		{"document:d1#view", "set folder:root#view"},
		{"document:d1#view", "set group:eng#member"},
		{"document:d1#view", "set group:infra#member"},
		{"folder:sub#view", "set group:infra#member"},
		{"document:d2#view", "member user:cat"},
		{"document:d3#view", "member user:bob"},
	} {
		if !rows[want] {
			t.Errorf("lookup lacks %v; got %v", want, rows)
		}
	}
	users := []string{"ann", "bob", "cat", "dan"}
	agree := func(rows map[setRow]bool, at *v1.ZedToken) {
		t.Helper()
		for _, u := range users {
			if got, want := documentsOf(rows, u), ts.lookupDocs(t, u, at); !slices.Equal(got, want) {
				t.Errorf("user %s: the rows' join gives %v, LookupResources %v", u, got, want)
			}
		}
	}
	agree(rows, tok)

	ctx := ctxT(t)
	watch, err := client.WatchPermissionSets(ctx, &mv0.WatchPermissionSetsRequest{OptionalStartingAfter: tok})
	if err != nil {
		t.Fatal(err)
	}
	del := func(r *v1.Relationship) *v1.ZedToken {
		resp, err := ts.perms.WriteRelationships(ctxT(t), &v1.WriteRelationshipsRequest{Updates: []*v1.RelationshipUpdate{update(v1.RelationshipUpdate_OPERATION_DELETE, r)}})
		if err != nil {
			t.Fatal(err)
		}
		return resp.GetWrittenAt()
	}
	ts.write(t, relationship("group", "infra", "member", "user", "dan", ""))
	del(relationship("document", "d2", "viewer", "user", "cat", "")) // d2#view still holds cat (editor)
	del(relationship("folder", "sub", "parent", "folder", "root", ""))
	last := ts.write(t, relationship("document", "d3", "viewer", "group", "infra", "member"))
	lastRev, _ := decodeToken(last)
	completed := 0
	for {
		resp, err := watch.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if c := resp.GetChange(); c != nil {
			r := rowOf(c)
			added := c.GetOperation() == mv0.PermissionSetChange_SET_OPERATION_ADDED
			if rows[r] == added {
				t.Fatalf("change %v %v does not change the rows", c.GetOperation(), r)
			}
			if added {
				rows[r] = true
			} else {
				delete(rows, r)
			}
			continue
		}
		at := resp.GetCompletedRevision()
		if at == nil {
			t.Fatalf("unexpected response %v", resp)
		}
		completed++
		want, _ := lookupSets(t, client, at, 4)
		if !maps.Equal(rows, want) {
			t.Fatalf("at %s the watched rows %v differ from the lookup %v", at.GetToken(), rows, want)
		}
		agree(rows, at)
		if rev, _ := decodeToken(at); rev >= lastRev {
			break
		}
	}
	if completed < 4 {
		t.Errorf("%d revisions completed, want at least 4", completed)
	}
	if !rows[setRow{"document:d2#view", "member user:cat"}] || rows[setRow{"folder:sub#view", "set folder:root#view"}] {
		t.Errorf("final rows %v", rows)
	}

	// A schema change that changes what document#view is made of is breaking.
	ts.writeSchema(t, strings.Replace(materializeSchema, "permission view = viewer + edit + parent->view", "permission view = viewer + parent->view", 1))
	for {
		resp, err := watch.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if resp.GetCompletedRevision() != nil {
			continue
		}
		b := resp.GetBreakingSchemaChange()
		if b == nil || len(b.GetAffectedPermissions()) != 1 || b.GetAffectedPermissions()[0].GetPermission() != "view" {
			t.Fatalf("got %v, want a breaking schema change of document#view", resp)
		}
		next, err := watch.Recv()
		if err != nil || next.GetLookupPermissionSetsRequired().GetRequiredLookupAt().GetToken() != b.GetChangeAt().GetToken() {
			t.Fatalf("got %v, %v, want lookup_permission_sets_required at the change", next, err)
		}
		break
	}
}

// TestMaterializeBadInput: the mistakes a client or operator can make are refused with
// SpiceDB's code and reason for the same kind of mistake, naming what was wrong.
func TestMaterializeBadInput(t *testing.T) {
	ts := start(t, func(c *Config) {
		c.Materialize = []materialize.Target{{Resource: "document", Permission: "view", SubjectType: "user"}}
	})
	ts.writeSchema(t, materializeSchema)
	client := mv0.NewWatchPermissionSetsServiceClient(ts.conn)
	recvErr := func(stream interface{ Recv() (any, error) }) error {
		for {
			if _, err := stream.Recv(); err != nil {
				return err
			}
		}
	}
	lookup := func(req *mv0.LookupPermissionSetsRequest) error {
		s, err := client.LookupPermissionSets(ctxT(t), req)
		if err != nil {
			return err
		}
		return recvErr(recvAny[*mv0.LookupPermissionSetsResponse]{s})
	}
	st := wantCode(t, lookup(&mv0.LookupPermissionSetsRequest{}), codes.InvalidArgument, v1.ErrorReason_ERROR_REASON_UNSPECIFIED)
	if !strings.Contains(st.Message(), "limit is required") {
		t.Errorf("message %q", st.Message())
	}
	ts.write(t, relationship("document", "d", "viewer", "user", "u", ""), relationship("document", "e", "viewer", "user", "u", ""))
	s, err := client.LookupPermissionSets(ctxT(t), &mv0.LookupPermissionSetsRequest{Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	first, err := s.Recv()
	if err != nil {
		t.Fatal(err)
	}
	st = wantCode(t, lookup(&mv0.LookupPermissionSetsRequest{Limit: 5, OptionalStartingAfterCursor: first.GetCursor()}), codes.InvalidArgument, v1.ErrorReason_ERROR_REASON_UNSPECIFIED)
	if !strings.Contains(st.Message(), "does not match the limit 1 of the cursor") {
		t.Errorf("message %q", st.Message())
	}
	bad := first.GetCursor()
	bad.Cursor = "garbage"
	wantCode(t, lookup(&mv0.LookupPermissionSetsRequest{OptionalStartingAfterCursor: bad}), codes.InvalidArgument, v1.ErrorReason_ERROR_REASON_INVALID_CURSOR)

	future := tokenFor(1 << 40)
	wantCode(t, lookup(&mv0.LookupPermissionSetsRequest{Limit: 1, OptionalAtRevision: future}), codes.OutOfRange, v1.ErrorReason_ERROR_REASON_UNSPECIFIED)
	w, err := client.WatchPermissionSets(ctxT(t), &mv0.WatchPermissionSetsRequest{OptionalStartingAfter: future})
	if err != nil {
		t.Fatal(err)
	}
	wantCode(t, recvErr(recvAny[*mv0.WatchPermissionSetsResponse]{w}), codes.OutOfRange, v1.ErrorReason_ERROR_REASON_UNSPECIFIED)

	// A schema that drops a configured permission: the lookup names the target and
	// answers as SpiceDB answers an unknown permission.
	ts.writeSchema(t, strings.Replace(materializeSchema, "permission view = viewer + edit + parent->view", "permission see = viewer", 1))
	st = wantCode(t, lookup(&mv0.LookupPermissionSetsRequest{Limit: 10}), codes.FailedPrecondition, v1.ErrorReason_ERROR_REASON_UNKNOWN_RELATION_OR_PERMISSION)
	if !strings.Contains(st.Message(), "document#view@user") {
		t.Errorf("message %q", st.Message())
	}

	// The API keys guard it as they guard the rest.
	anonConn := dial(t, ts.grpcAddr, "")
	t.Cleanup(func() { _ = anonConn.Close() })
	anon := mv0.NewWatchPermissionSetsServiceClient(anonConn)
	_, err = anon.DownloadPermissionSets(ctxT(t), &mv0.DownloadPermissionSetsRequest{})
	wantCode(t, err, codes.Unauthenticated, v1.ErrorReason_ERROR_REASON_UNSPECIFIED)

	// A configuration the schema cannot stream is refused at start.
	for _, tc := range []struct {
		target materialize.Target
		want   string
	}{
		{materialize.Target{Resource: "doc", Permission: "view", SubjectType: "user"}, "resource type: no definition `doc`"},
		{materialize.Target{Resource: "document", Permission: "see", SubjectType: "group"}, "no path of `document#see` reaches a subject of type `group`"},
	} {
		_, err := New(Config{GRPCAddr: "127.0.0.1:0", PresharedKeys: []string{testKey}, Datastore: ts.srv.store, Materialize: []materialize.Target{tc.target}})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: got %v, want an error naming %q", tc.target, err, tc.want)
		}
	}
}

// recvAny adapts a typed stream to one Recv signature.
type recvAny[T any] struct {
	s interface{ Recv() (T, error) }
}

func (r recvAny[T]) Recv() (any, error) { return r.s.Recv() }

// TestMaterializeWatchPermissions: the computed permissions of document#view@user
// streamed by WatchPermissions, applied to the permissions checked at the start, equal
// CheckPermission's answers for every document and user at every completed revision of
// a random history (groups in groups, folders in folders, caveated memberships).
func TestMaterializeWatchPermissions(t *testing.T) {
	ts := start(t, func(c *Config) {
		c.Materialize = []materialize.Target{{Resource: "document", Permission: "view", SubjectType: "user"}}
	})
	ts.writeSchema(t, `caveat weekday(day string) { day != "sunday" }
`+strings.Replace(materializeSchema, "relation member: user | group#member", "relation member: user | user with weekday | group#member", 1))
	client := mv0.NewWatchPermissionsServiceClient(ts.conn)
	ids := []string{"a", "b", "c"}
	state := func(at *v1.ZedToken) map[string]v1.CheckPermissionResponse_Permissionship {
		out := map[string]v1.CheckPermissionResponse_Permissionship{}
		for _, d := range ids {
			for _, u := range ids {
				resp, err := ts.check(t, &v1.Consistency{Requirement: &v1.Consistency_AtExactSnapshot{AtExactSnapshot: at}}, obj("document", d), "view", sub("user", u, ""))
				if err != nil {
					t.Fatal(err)
				}
				if p := resp.GetPermissionship(); p != v1.CheckPermissionResponse_PERMISSIONSHIP_NO_PERMISSION {
					out[d+"@"+u] = p
				}
			}
		}
		return out
	}
	start := ts.write(t, relationship("document", "a", "viewer", "user", "a", ""))
	have := state(start)
	watch, err := client.WatchPermissions(ctxT(t), &mv0.WatchPermissionsRequest{
		Permissions:           []*mv0.WatchedPermission{{ResourceType: "document", Permission: "view", SubjectType: "user"}},
		OptionalStartingAfter: start,
	})
	if err != nil {
		t.Fatal(err)
	}
	rnd := rand.New(rand.NewPCG(7, 7))
	pick := func() string { return ids[rnd.IntN(len(ids))] }
	// ordered picks x < y, so that the data has no cycle (evaluation refuses one).
	ordered := func() (string, string) {
		i := rnd.IntN(len(ids) - 1)
		return ids[i], ids[i+1+rnd.IntN(len(ids)-1-i)]
	}
	var last *v1.ZedToken
	for range 30 {
		var r *v1.Relationship
		switch rnd.IntN(6) {
		case 0:
			r = relationship("group", pick(), "member", "user", pick(), "")
		case 1:
			x, y := ordered()
			r = relationship("group", x, "member", "group", y, "member")
		case 2:
			r = relationship("folder", pick(), "viewer", "group", pick(), "member")
		case 3:
			x, y := ordered()
			r = relationship("folder", x, "parent", "folder", y, "")
		case 4:
			r = relationship("document", pick(), "parent", "folder", pick(), "")
		default:
			r = relationship("group", pick(), "member", "user", pick(), "")
			r.OptionalCaveat = &v1.ContextualizedCaveat{CaveatName: "weekday"}
		}
		op := v1.RelationshipUpdate_OPERATION_TOUCH
		if rnd.IntN(3) == 0 {
			op = v1.RelationshipUpdate_OPERATION_DELETE
		}
		resp, err := ts.perms.WriteRelationships(ctxT(t), &v1.WriteRelationshipsRequest{Updates: []*v1.RelationshipUpdate{update(op, r)}})
		if err != nil {
			t.Fatal(err)
		}
		last = resp.GetWrittenAt()
	}
	lastRev, _ := decodeToken(last)
	changes := 0
	for {
		resp, err := watch.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if c := resp.GetChange(); c != nil {
			changes++
			key := c.GetResource().GetObjectId() + "@" + c.GetSubject().GetObject().GetObjectId()
			ship := v1.CheckPermissionResponse_Permissionship(c.GetPermissionship())
			if have[key] == ship || (ship == v1.CheckPermissionResponse_PERMISSIONSHIP_NO_PERMISSION && have[key] == 0) {
				t.Fatalf("change %v repeats the state", c)
			}
			if ship == v1.CheckPermissionResponse_PERMISSIONSHIP_NO_PERMISSION {
				delete(have, key)
			} else {
				have[key] = ship
			}
			continue
		}
		at := resp.GetCompletedRevision()
		if want := state(at); !maps.Equal(have, want) {
			t.Fatalf("at %s the watched permissions %v differ from the checks %v", at.GetToken(), have, want)
		}
		if rev, _ := decodeToken(at); rev >= lastRev {
			break
		}
	}

	if changes < 5 {
		t.Fatalf("only %d changes streamed: the history tests too little", changes)
	}

	// A permission not configured is refused, naming the flag to configure it.
	bad, err := client.WatchPermissions(ctxT(t), &mv0.WatchPermissionsRequest{Permissions: []*mv0.WatchedPermission{{ResourceType: "folder", Permission: "view", SubjectType: "user"}}})
	if err == nil {
		_, err = bad.Recv()
	}
	st := wantCode(t, err, codes.FailedPrecondition, v1.ErrorReason_ERROR_REASON_UNSPECIFIED)
	if !strings.Contains(st.Message(), "--materialize folder#view@user") {
		t.Errorf("message %q", st.Message())
	}
}

// TestMaterializeExperimental: ExperimentalRoaringLookupResources answers
// LookupResources as a portable roaring64 bitmap, refusing ids it cannot hold; and
// ExperimentalCountRelationshipsByFilter counts what ReadRelationships reads.
func TestMaterializeExperimental(t *testing.T) {
	ts := start(t, nil)
	ts.writeSchema(t, materializeSchema)
	ts.write(t,
		relationship("group", "eng", "member", "user", "1", ""),
		relationship("folder", "9", "viewer", "group", "eng", "member"),
		relationship("document", "17592186044415", "parent", "folder", "9", ""),
		relationship("document", "3", "viewer", "user", "1", ""),
		relationship("document", "4", "editor", "user", "2", ""),
	)
	roaring := mv0.NewRoaringLookupResourcesServiceClient(ts.conn)
	resp, err := roaring.ExperimentalRoaringLookupResources(ctxT(t), &mv0.ExperimentalRoaringLookupResourcesRequest{
		Consistency: fullyConsistent(), ResourceObjectType: "document", Permission: "view", Subject: sub("user", "1", ""),
	})
	if err != nil {
		t.Fatal(err)
	}
	bm := roaring64.New()
	if err := bm.UnmarshalBinary(resp.GetBitmap()); err != nil {
		t.Fatal(err)
	}
	if got := bm.ToArray(); !slices.Equal(got, []uint64{3, 17592186044415}) || resp.GetCardinality() != 2 || resp.GetAtRevision() == nil {
		t.Fatalf("bitmap %v cardinality %d at %v", got, resp.GetCardinality(), resp.GetAtRevision())
	}
	for _, id := range []string{"007", "17592186044416", "x"} {
		ts.write(t, relationship("document", id, "viewer", "user", "1", ""))
		_, err := roaring.ExperimentalRoaringLookupResources(ctxT(t), &mv0.ExperimentalRoaringLookupResourcesRequest{
			Consistency: fullyConsistent(), ResourceObjectType: "document", Permission: "view", Subject: sub("user", "1", ""),
		})
		st := wantCode(t, err, codes.FailedPrecondition, v1.ErrorReason_ERROR_REASON_UNSPECIFIED)
		if !strings.Contains(st.Message(), "document:"+id+" is not a canonical decimal integer of at most 44 bits") {
			t.Errorf("message %q", st.Message())
		}
		resp, err := ts.perms.WriteRelationships(ctxT(t), &v1.WriteRelationshipsRequest{Updates: []*v1.RelationshipUpdate{update(v1.RelationshipUpdate_OPERATION_DELETE, relationship("document", id, "viewer", "user", "1", ""))}})
		if err != nil || resp == nil {
			t.Fatal(err)
		}
	}

	count := mv0.NewRelationshipsServiceClient(ts.conn)
	for _, tc := range []struct {
		filter *v1.RelationshipFilter
		want   uint64
	}{
		{&v1.RelationshipFilter{ResourceType: "document"}, 3},
		{&v1.RelationshipFilter{ResourceType: "document", OptionalRelation: "viewer"}, 1},
		{&v1.RelationshipFilter{OptionalSubjectFilter: &v1.SubjectFilter{SubjectType: "user"}}, 3},
	} {
		resp, err := count.ExperimentalCountRelationshipsByFilter(ctxT(t), &mv0.ExperimentalCountRelationshipsByFilterRequest{RelationshipFilter: tc.filter})
		if err != nil || resp.GetRelationshipCount() != tc.want || resp.GetReadAt() == nil {
			t.Errorf("%v: got %v, %v, want %d", tc.filter, resp, err, tc.want)
		}
	}
	_, err = count.ExperimentalCountRelationshipsByFilter(ctxT(t), &mv0.ExperimentalCountRelationshipsByFilterRequest{RelationshipFilter: &v1.RelationshipFilter{ResourceType: "doc"}})
	wantCode(t, err, codes.FailedPrecondition, v1.ErrorReason_ERROR_REASON_UNKNOWN_DEFINITION)
	_, err = count.ExperimentalCountRelationshipsByFilter(ctxT(t), &mv0.ExperimentalCountRelationshipsByFilterRequest{RelationshipFilter: &v1.RelationshipFilter{}})
	wantCode(t, err, codes.InvalidArgument, v1.ErrorReason_ERROR_REASON_INVALID_FILTER)
}

// TestMaterializeDownload: DownloadPermissionSets answers with a signed, expiring URL
// on the HTTP listener whose body is the lookup's permission sets at the revision.
func TestMaterializeDownload(t *testing.T) {
	ts := start(t, func(c *Config) {
		c.Materialize = []materialize.Target{{Resource: "document", Permission: "view", SubjectType: "user"}}
	})
	ts.writeSchema(t, materializeSchema)
	at := ts.write(t,
		relationship("group", "eng", "member", "user", "ann", ""),
		relationship("document", "d", "viewer", "group", "eng", "member"),
		relationship("document", "e", "editor", "user", "bob", ""),
	)
	client := mv0.NewWatchPermissionSetsServiceClient(ts.conn)
	resp, err := client.DownloadPermissionSets(ctxT(t), &mv0.DownloadPermissionSetsRequest{OptionalAtRevision: at})
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetAtRevision().GetToken() != at.GetToken() || len(resp.GetFiles()) != 1 {
		t.Fatalf("response %v", resp)
	}
	ts.write(t, relationship("document", "f", "viewer", "user", "cat", "")) // after the revision: not in the file
	get := func(u string) (int, string) {
		req, err := http.NewRequestWithContext(ctxT(t), http.MethodGet, u, nil)
		if err != nil {
			t.Fatal(err)
		}
		r, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Body.Close()
		b, err := io.ReadAll(r.Body)
		if err != nil {
			t.Fatal(err)
		}
		return r.StatusCode, string(b)
	}
	code, body := get(resp.GetFiles()[0].GetUrl())
	if code != http.StatusOK {
		t.Fatalf("GET: %d %s", code, body)
	}
	got := map[setRow]bool{}
	for line := range strings.Lines(body) {
		var c mv0.PermissionSetChange
		if err := protojson.Unmarshal([]byte(line), &c); err != nil {
			t.Fatal(err)
		}
		got[rowOf(&c)] = true
	}
	want, _ := lookupSets(t, client, at, 100)
	if !maps.Equal(got, want) || len(got) != 3 {
		t.Fatalf("downloaded %v, lookup %v", got, want)
	}
	tampered := strings.Replace(resp.GetFiles()[0].GetUrl(), "expires=", "expires=9", 1)
	if code, body := get(tampered); code != http.StatusForbidden || !strings.Contains(body, "not one this server signed") {
		t.Errorf("tampered URL: %d %s", code, body)
	}

	noHTTP := start(t, func(c *Config) { c.HTTPAddr = ""; c.Datastore = ts.srv.store })
	_, err = mv0.NewWatchPermissionSetsServiceClient(noHTTP.conn).DownloadPermissionSets(ctxT(t), &mv0.DownloadPermissionSetsRequest{})
	st := wantCode(t, err, codes.FailedPrecondition, v1.ErrorReason_ERROR_REASON_UNSPECIFIED)
	if !strings.Contains(st.Message(), "--http-addr") {
		t.Errorf("message %q", st.Message())
	}
}
