package main

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	v0 "github.com/authzed/authzed-go/proto/authzed/api/materialize/v0"
	v1 "github.com/authzed/authzed-go/proto/authzed/api/v1"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/latch-authz/latch/internal/store/postgres/pgtest"
)

func memberChange(added bool, set, member string) *v0.PermissionSetChange {
	st, sid, srel := parseRef(set)
	mt, mid, mrel := parseRef(member)
	return &v0.PermissionSetChange{
		Operation: op(added), ParentSet: &v0.SetReference{ObjectType: st, ObjectId: sid, PermissionOrRelation: srel},
		Child: &v0.PermissionSetChange_ChildMember{ChildMember: &v0.MemberReference{ObjectType: mt, ObjectId: mid, OptionalPermissionOrRelation: mrel}},
	}
}

func setChange(added bool, set, child string) *v0.PermissionSetChange {
	st, sid, srel := parseRef(set)
	ct, cid, crel := parseRef(child)
	return &v0.PermissionSetChange{
		Operation: op(added), ParentSet: &v0.SetReference{ObjectType: st, ObjectId: sid, PermissionOrRelation: srel},
		Child: &v0.PermissionSetChange_ChildSet{ChildSet: &v0.SetReference{ObjectType: ct, ObjectId: cid, PermissionOrRelation: crel}},
	}
}

func op(added bool) v0.PermissionSetChange_SetOperation {
	if added {
		return v0.PermissionSetChange_SET_OPERATION_ADDED
	}
	return v0.PermissionSetChange_SET_OPERATION_REMOVED
}

// parseRef splits "type:id#rel" (the relation optional).
func parseRef(s string) (typ, id, relation string) {
	typ, rest, _ := strings.Cut(s, ":")
	id, relation, _ = strings.Cut(rest, "#")
	return typ, id, relation
}

func viewable(ctx context.Context, t *testing.T, db *pgxpool.Pool, user string) ([]string, string) {
	t.Helper()
	ids, rev, err := lookup(ctx, db, "document", "view", "user", user)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(ids)
	return ids, rev.GetToken()
}

// TestTablesJoin stores a snapshot and revisions of permission sets by hand (child
// sets transitively, as the server streams them) and checks the join through nested
// sets (a cycle among them), a set sharing a document's id, a wildcard member, a revision
// applied twice (as after a crash between its commit and the next read), and a row
// added and removed within one revision.
func TestTablesJoin(t *testing.T) {
	ctx := context.Background()
	db, err := pgxpool.New(ctx, pgtest.Get(t).NewDatabase(t, "", nil))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := ensureTables(ctx, db); err != nil {
		t.Fatal(err)
	}
	if err := beginRebuild(ctx, db, nil); err != nil {
		t.Fatal(err)
	}
	snapshot := []*v0.PermissionSetChange{
		memberChange(true, "group:inner#member", "user:ann"),
		setChange(true, "group:outer#member", "group:inner#member"),
		setChange(true, "group:inner#member", "group:outer#member"), // a cycle
		setChange(true, "document:d1#view", "group:outer#member"),
		setChange(true, "document:d1#view", "group:inner#member"), // the closure: inner is below outer
		memberChange(true, "group:d1#member", "user:cid"),         // a group sharing document d1's id
		memberChange(true, "document:d2#view", "user:bob"),
		memberChange(true, "document:d3#view", "user:*"),
		memberChange(true, "group:other#member", "user:bob"),
	}
	if err := storePage(ctx, db, snapshot, &v0.Cursor{Limit: 9, Token: &v1.ZedToken{Token: "r1"}}); err != nil {
		t.Fatal(err)
	}
	if err := finishRebuild(ctx, db, &v1.ZedToken{Token: "r1"}); err != nil {
		t.Fatal(err)
	}
	for user, want := range map[string][]string{"ann": {"d1", "d3"}, "bob": {"d2", "d3"}, "cid": {"d3"}} {
		if got, rev := viewable(ctx, t, db, user); !slices.Equal(got, want) || rev != "r1" {
			t.Errorf("%s at r1: %v at %q, want %v at r1", user, got, rev, want)
		}
	}

	r2 := []*v0.PermissionSetChange{
		setChange(true, "document:d2#view", "group:other#member"),
		memberChange(false, "document:d2#view", "user:bob"),
		memberChange(true, "group:inner#member", "user:bob"),
		memberChange(false, "group:inner#member", "user:bob"),
		memberChange(false, "document:d3#view", "user:*"),
	}
	for range 2 {
		if err := storeRevision(ctx, db, r2, &v1.ZedToken{Token: "r2"}); err != nil {
			t.Fatal(err)
		}
		for user, want := range map[string][]string{"ann": {"d1"}, "bob": {"d2"}, "cid": nil} {
			if got, rev := viewable(ctx, t, db, user); !slices.Equal(got, want) || rev != "r2" {
				t.Errorf("%s at r2: %v at %q, want %v at r2", user, got, rev, want)
			}
		}
	}

	bad := []*v0.PermissionSetChange{{ParentSet: &v0.SetReference{ObjectType: "document", ObjectId: "d1", PermissionOrRelation: "view"}}}
	if err := storeRevision(ctx, db, bad, &v1.ZedToken{Token: "r3"}); !errors.Is(err, errBadChange) {
		t.Errorf("a change with no operation: %v, want errBadChange", err)
	}
	if _, rev := viewable(ctx, t, db, "ann"); rev != "r2" {
		t.Errorf("after a refused revision the tables are at %q, want r2", rev)
	}
}
