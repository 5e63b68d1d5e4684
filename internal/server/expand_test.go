package server

import (
	"slices"
	"strings"
	"testing"

	v1 "github.com/authzed/authzed-go/proto/authzed/api/v1"
	"google.golang.org/grpc/codes"
)

// treeString renders an expansion compactly: `obj#rel op(children...)` for operators,
// `obj#rel[subjects...]` (sorted) for leaves.
func treeString(n *v1.PermissionRelationshipTree) string {
	head := n.GetExpandedObject().GetObjectType() + ":" + n.GetExpandedObject().GetObjectId() + "#" + n.GetExpandedRelation()
	if in := n.GetIntermediate(); in != nil {
		var children []string
		for _, c := range in.GetChildren() {
			children = append(children, treeString(c))
		}
		op := strings.ToLower(strings.TrimPrefix(in.GetOperation().String(), "OPERATION_"))
		return head + " " + op + "(" + strings.Join(children, ", ") + ")"
	}
	var subjects []string
	for _, s := range n.GetLeaf().GetSubjects() {
		subject := s.GetObject().GetObjectType() + ":" + s.GetObject().GetObjectId()
		if s.GetOptionalRelation() != "" {
			subject += "#" + s.GetOptionalRelation()
		}
		subjects = append(subjects, subject)
	}
	slices.Sort(subjects)
	return head + "[" + strings.Join(subjects, " ") + "]"
}

const expandSchema = `definition user {}
definition group {
	relation member: user
}
definition folder {
	relation reader: user
	permission read = reader
}
definition doc {
	relation parent: folder | group
	relation viewer: user | group#member
	relation editor: user
	relation banned: user
	permission edit = editor
	permission view = viewer - banned
	permission plain = viewer
	permission nested = edit + viewer
	permission inherited = parent->read
	permission nothing = nil
}`

// TestExpandPermissionTree holds expansions to SpiceDB's shape: every permission is an
// operator node named for itself (a single operand is a union of one), a computed
// permission is expanded in place, an arrow is a union over the objects it follows
// (with an empty leaf for an object whose type lacks the target), and subject sets in
// leaves stay unexpanded.
func TestExpandPermissionTree(t *testing.T) {
	ts := start(t, nil)
	ts.writeSchema(t, expandSchema)
	ts.write(t, relationship("doc", "d", "viewer", "user", "ann", ""), relationship("doc", "d", "viewer", "group", "eng", "member"),
		relationship("doc", "d", "banned", "user", "bob", ""), relationship("doc", "d", "editor", "user", "cat", ""),
		relationship("doc", "d", "parent", "folder", "f", ""), relationship("doc", "d", "parent", "group", "eng", ""),
		relationship("folder", "f", "reader", "user", "dan", ""), relationship("group", "eng", "member", "user", "eve", ""))
	for _, c := range []struct{ permission, want string }{
		{"view", "doc:d#view exclusion(doc:d#viewer[group:eng#member user:ann], doc:d#banned[user:bob])"},
		{"plain", "doc:d#plain union(doc:d#viewer[group:eng#member user:ann])"},
		{"nested", "doc:d#nested union(doc:d#edit union(doc:d#editor[user:cat]), doc:d#viewer[group:eng#member user:ann])"},
		{"inherited", "doc:d#inherited union(doc:d#inherited union(folder:f#read union(folder:f#reader[user:dan]), doc:d#inherited[]))"},
		{"nothing", "doc:d#nothing union(doc:d#nothing[])"},
		{"viewer", "doc:d#viewer[group:eng#member user:ann]"},
	} {
		resp, err := ts.perms.ExpandPermissionTree(ctxT(t), &v1.ExpandPermissionTreeRequest{Consistency: fullyConsistent(), Resource: obj("doc", "d"), Permission: c.permission})
		if err != nil {
			t.Fatalf("expand %s: %v", c.permission, err)
		}
		if got := treeString(resp.TreeRoot); got != c.want {
			t.Errorf("expand %s:\n got %s\nwant %s", c.permission, got, c.want)
		}
		if resp.ExpandedAt.GetToken() == "" {
			t.Errorf("expand %s: no expanded_at", c.permission)
		}
	}
	_, err := ts.perms.ExpandPermissionTree(ctxT(t), &v1.ExpandPermissionTreeRequest{Consistency: fullyConsistent(), Resource: obj("doc", "d"), Permission: "nope"})
	wantCode(t, err, codes.FailedPrecondition, v1.ErrorReason_ERROR_REASON_UNKNOWN_RELATION_OR_PERMISSION)
	_, err = ts.perms.ExpandPermissionTree(ctxT(t), &v1.ExpandPermissionTreeRequest{Consistency: fullyConsistent(), Resource: obj("page", "d"), Permission: "view"})
	wantCode(t, err, codes.FailedPrecondition, v1.ErrorReason_ERROR_REASON_UNKNOWN_DEFINITION)
}
