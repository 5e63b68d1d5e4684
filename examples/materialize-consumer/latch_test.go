package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	v0 "github.com/authzed/authzed-go/proto/authzed/api/materialize/v0"
	v1 "github.com/authzed/authzed-go/proto/authzed/api/v1"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/latch-authz/latch/internal/materialize"
	"github.com/latch-authz/latch/internal/server"
)

// The latch side of the consumer's tests: a server, its data, the writes that move
// it, and the comparison of the consumer's tables with LookupResources.

const testKey = "materialize-consumer-test"

// testSchema nests groups in groups and folders in folders, and gives documents a
// view reached directly, through a wildcard, through groups, and through the folder
// tree.
const testSchema = `definition user {}

definition group {
	relation member: user | group#member
}

definition folder {
	relation parent: folder
	relation viewer: user | group#member
	permission view = viewer + parent->view
}

definition document {
	relation folder: folder
	relation viewer: user | user:* | group#member
	relation editor: user | group#member
	permission view = viewer + editor + folder->view
}`

// narrowerSchema drops editor from document#view: a breaking schema change for the
// permission sets of document#view.
var narrowerSchema = strings.Replace(testSchema, "permission view = viewer + editor + folder->view", "permission view = viewer + folder->view", 1)

const (
	users, groups, folders, documents = 24, 10, 6, 30
	writes                            = 150
)

// latch is an in-process latch server with clients of its APIs.
type latch struct {
	addr   string
	conn   *grpc.ClientConn
	perms  v1.PermissionsServiceClient
	schema v1.SchemaServiceClient
	sets   v0.WatchPermissionSetsServiceClient
}

// startLatch runs latch on 127.0.0.1 with document#view@user materialized, until the
// test ends.
func startLatch(t *testing.T) *latch {
	t.Helper()
	srv, err := server.New(server.Config{
		GRPCAddr: "127.0.0.1:0", HTTPAddr: "127.0.0.1:0", PresharedKeys: []string{testKey},
		ShutdownGrace: 2 * time.Second, DatastoreEngine: "memory",
		Materialize: []materialize.Target{{Resource: "document", Permission: "view", SubjectType: "user"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	addr, _ := srv.Addrs()
	conn, err := dial(addr, testKey, true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = conn.Close()
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return &latch{addr: addr, conn: conn, perms: v1.NewPermissionsServiceClient(conn), schema: v1.NewSchemaServiceClient(conn), sets: v0.NewWatchPermissionSetsServiceClient(conn)}
}

// startSeeded starts latch with the test schema and the starting data rnd draws
// (skipping the test when latch does not serve the Materialize API), and returns it
// with a context that ends with the test or after two minutes.
func startSeeded(t *testing.T, rnd *rand.Rand) (*latch, context.Context) {
	t.Helper()
	l := startLatch(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	if _, err := l.schema.WriteSchema(ctx, &v1.WriteSchemaRequest{Schema: testSchema}); err != nil {
		t.Fatal(err)
	}
	requireMaterialize(ctx, t, l)
	seed(ctx, t, l, rnd)
	return l, ctx
}

// requireMaterialize skips the test when latch does not serve the Materialize API.
func requireMaterialize(ctx context.Context, t *testing.T, l *latch) {
	t.Helper()
	stream, err := l.sets.LookupPermissionSets(ctx, &v0.LookupPermissionSetsRequest{Limit: 1})
	if err == nil {
		_, err = stream.Recv()
	}
	if status.Code(err) == codes.Unimplemented {
		t.Skipf("latch does not serve authzed.api.materialize.v0.WatchPermissionSetsService/LookupPermissionSets yet: %v", err)
	}
	if err != nil && !errors.Is(err, io.EOF) {
		t.Fatalf("LookupPermissionSets: %v", err)
	}
}

func rel(resType, resID, relation, subType, subID, subRel string) *v1.Relationship {
	return &v1.Relationship{
		Resource: &v1.ObjectReference{ObjectType: resType, ObjectId: resID}, Relation: relation,
		Subject: &v1.SubjectReference{Object: &v1.ObjectReference{ObjectType: subType, ObjectId: subID}, OptionalRelation: subRel},
	}
}

func id(prefix string, n int) string { return fmt.Sprint(prefix, n) }

// seed writes the starting data: a tree of groups, users in groups, a tree of folders
// shared with groups, documents in folders shared with groups and users.
func seed(ctx context.Context, t *testing.T, l *latch, rnd *rand.Rand) {
	t.Helper()
	var rels []*v1.Relationship
	for g := 1; g < groups; g++ {
		rels = append(rels, rel("group", id("g", (g-1)/2), "member", "group", id("g", g), "member"))
	}
	for u := range users {
		rels = append(rels, rel("group", id("g", rnd.IntN(groups)), "member", "user", id("u", u), ""))
	}
	for f := 1; f < folders; f++ {
		rels = append(rels, rel("folder", id("f", f), "parent", "folder", id("f", rnd.IntN(f)), ""))
	}
	for f := range folders {
		rels = append(rels, rel("folder", id("f", f), "viewer", "group", id("g", rnd.IntN(groups)), "member"))
	}
	for d := range documents {
		rels = append(rels, rel("document", id("d", d), "folder", "folder", id("f", rnd.IntN(folders)), ""),
			rel("document", id("d", d), "viewer", "group", id("g", rnd.IntN(groups)), "member"),
			rel("document", id("d", d), "editor", "user", id("u", rnd.IntN(users)), ""))
	}
	if err := write(ctx, l, v1.RelationshipUpdate_OPERATION_TOUCH, rels...); err != nil {
		t.Fatal(err)
	}
}

func write(ctx context.Context, l *latch, op v1.RelationshipUpdate_Operation, rels ...*v1.Relationship) error {
	var ups []*v1.RelationshipUpdate
	for _, r := range rels {
		ups = append(ups, &v1.RelationshipUpdate{Operation: op, Relationship: r})
	}
	_, err := l.perms.WriteRelationships(ctx, &v1.WriteRelationshipsRequest{Updates: ups})
	return err
}

// writeLoad makes the writes that move things: a user to another group, a group into
// or out of another (deeper groups into shallower ones only, so groups form no
// cycle), a folder under another, a document's sharing.
func writeLoad(ctx context.Context, l *latch, rnd *rand.Rand) error {
	for range writes {
		touch, remove := v1.RelationshipUpdate_OPERATION_TOUCH, v1.RelationshipUpdate_OPERATION_DELETE
		var err error
		switch rnd.IntN(4) {
		case 0:
			u, from := id("u", rnd.IntN(users)), rnd.IntN(groups)
			to := (from + 1 + rnd.IntN(groups-1)) % groups
			_, err = l.perms.WriteRelationships(ctx, &v1.WriteRelationshipsRequest{Updates: []*v1.RelationshipUpdate{
				{Operation: remove, Relationship: rel("group", id("g", from), "member", "user", u, "")},
				{Operation: touch, Relationship: rel("group", id("g", to), "member", "user", u, "")},
			}})
		case 1:
			child := 1 + rnd.IntN(groups-1)
			op := []v1.RelationshipUpdate_Operation{touch, remove}[rnd.IntN(2)]
			err = write(ctx, l, op, rel("group", id("g", rnd.IntN(child)), "member", "group", id("g", child), "member"))
		case 2:
			f := 1 + rnd.IntN(folders-1)
			op := []v1.RelationshipUpdate_Operation{touch, remove}[rnd.IntN(2)]
			err = write(ctx, l, op, rel("folder", id("f", f), "parent", "folder", id("f", rnd.IntN(f)), ""))
		default:
			d := id("d", rnd.IntN(documents))
			op := []v1.RelationshipUpdate_Operation{touch, remove}[rnd.IntN(2)]
			user := id("u", rnd.IntN(users))
			if rnd.IntN(8) == 0 {
				user = "*"
			}
			err = write(ctx, l, op, rel("document", d, []string{"viewer", "editor"}[rnd.IntN(2)], "group", id("g", rnd.IntN(groups)), "member"),
				rel("document", d, "viewer", "user", user, ""))
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// writer is writeLoad running.
type writer struct {
	done chan struct{} // closed when it ends
	err  error         // its error, once done is closed
}

// startWriter runs writeLoad with a seed.
func startWriter(ctx context.Context, l *latch, seed uint64) *writer {
	w := &writer{done: make(chan struct{})}
	go func() {
		defer close(w.done)
		w.err = writeLoad(ctx, l, rand.New(rand.NewPCG(seed, seed)))
	}()
	return w
}

// wait returns the writer's error once it has ended.
func (w *writer) wait() error {
	<-w.done
	return w.err
}

// waitFor shares a new document with a new user and waits (bounded by ctx) until the
// consumer's tables show it: the consumer has then applied every write before it.
func waitFor(ctx context.Context, t *testing.T, l *latch, db *pgxpool.Pool, name string) {
	t.Helper()
	if err := write(ctx, l, v1.RelationshipUpdate_OPERATION_TOUCH, rel("document", "marker-"+name, "viewer", "user", "marker-"+name, "")); err != nil {
		t.Fatal(err)
	}
	for {
		ids, _, err := lookup(ctx, db, "document", "view", "user", "marker-"+name)
		if err != nil && ctx.Err() == nil && !notCreated(err) {
			t.Fatal(err)
		}
		if slices.Contains(ids, "marker-"+name) {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the consumer did not apply the write of marker %s before the test's deadline", name)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// notCreated reports whether err is PostgreSQL's undefined_table: the consumer has
// not created its tables yet.
func notCreated(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "42P01"
}

// compareAll checks, for every user, that the tables' join equals LookupResources
// at the revision the tables are at.
func compareAll(ctx context.Context, t *testing.T, l *latch, db *pgxpool.Pool) {
	t.Helper()
	nonEmpty, pairs := 0, 0
	var at string
	for u := range users {
		user := id("u", u)
		got, rev, err := lookup(ctx, db, "document", "view", "user", user)
		if err != nil {
			t.Fatal(err)
		}
		if rev == nil {
			t.Fatal("the tables have no revision after a completed LookupPermissionSets")
		}
		slices.Sort(got) // PostgreSQL's collation need not order as Go does
		want, err := lookupResources(ctx, l, user, rev)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, want) {
			t.Errorf("user %s at %s: the tables' join gives %v, LookupResources %v", user, rev.GetToken(), got, want)
		}
		if len(want) > 0 {
			nonEmpty++
		}
		pairs += len(want)
		at = rev.GetToken()
	}
	if nonEmpty == 0 {
		t.Error("no user can view any document: the comparison proves nothing")
	}
	t.Logf("at %s: %d users see %d documents in all, as LookupResources says", at, nonEmpty, pairs)
}

// lookupResources returns the sorted ids of the documents user can view at rev.
func lookupResources(ctx context.Context, l *latch, user string, rev *v1.ZedToken) ([]string, error) {
	stream, err := l.perms.LookupResources(ctx, &v1.LookupResourcesRequest{
		ResourceObjectType: "document", Permission: "view",
		Subject:     &v1.SubjectReference{Object: &v1.ObjectReference{ObjectType: "user", ObjectId: user}},
		Consistency: &v1.Consistency{Requirement: &v1.Consistency_AtExactSnapshot{AtExactSnapshot: rev}},
	})
	if err != nil {
		return nil, err
	}
	var ids []string
	for {
		resp, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		if resp.GetPermissionship() == v1.LookupPermissionship_LOOKUP_PERMISSIONSHIP_HAS_PERMISSION {
			ids = append(ids, resp.GetResourceObjectId())
		}
	}
	slices.Sort(ids)
	return slices.Compact(ids), nil
}

// waitRevisions waits (bounded by ctx) until the consumer has stored n revisions
// (the first counts when the tables had none), or until done closes (the writes
// that would make them are over).
func waitRevisions(ctx context.Context, t *testing.T, db *pgxpool.Pool, n int, done <-chan struct{}) {
	t.Helper()
	var last *string
	for stored := 0; stored < n; {
		var rev *string
		err := db.QueryRow(ctx, "SELECT revision FROM materialize_state").Scan(&rev)
		if err != nil && !notCreated(err) {
			t.Fatal(err)
		}
		if rev != nil && (last == nil || *rev != *last) {
			stored, last = stored+1, rev
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the program stored %d revisions before the test's deadline, want %d", stored, n)
		case <-done:
			return
		case <-time.After(5 * time.Millisecond):
		}
	}
}
