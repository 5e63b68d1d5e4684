package server

import (
	"slices"
	"strings"
	"testing"

	v1 "github.com/authzed/authzed-go/proto/authzed/api/v1"
	"google.golang.org/grpc/codes"
)

const reflectSchema = `/** a person */
definition user {}

definition group {
	relation member: user | group#member
}

caveat on_weekday(day string) {
	day != "sat" && day != "sun"
}

definition folder {
	relation owner: user
	permission read = owner
}

definition document {
	relation parent: folder
	relation viewer: user | user:* | group#member | user with on_weekday
	/** who may edit */
	permission edit = parent->read
	permission view = viewer + edit
}`

func refs(rs []*v1.ReflectionRelationReference) []string {
	var out []string
	for _, r := range rs {
		s := r.DefinitionName + "#" + r.RelationName
		if r.IsPermission {
			s += "(p)"
		}
		out = append(out, s)
	}
	return out
}

func TestReflectSchema(t *testing.T) {
	ts := start(t, nil)
	ts.writeSchema(t, reflectSchema)
	resp, err := ts.schema.ReflectSchema(ctxT(t), &v1.ReflectSchemaRequest{Consistency: fullyConsistent()})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Definitions) != 4 || len(resp.Caveats) != 1 || resp.ReadAt == nil {
		t.Fatalf("reflection: %v", resp)
	}
	// Sorted by name, as SpiceDB sends them.
	if got := []string{resp.Definitions[0].Name, resp.Definitions[1].Name, resp.Definitions[2].Name, resp.Definitions[3].Name}; !slices.Equal(got, []string{"document", "folder", "group", "user"}) {
		t.Errorf("definitions in order %v, want them sorted by name", got)
	}
	doc, user := resp.Definitions[0], resp.Definitions[3]
	if user.Name != "user" || user.Comment != "/** a person */" || doc.Name != "document" || len(doc.Relations) != 2 || len(doc.Permissions) != 2 {
		t.Errorf("definitions: %v / %v", user, doc)
	}
	viewer := doc.Relations[1]
	if len(viewer.SubjectTypes) != 4 || !viewer.SubjectTypes[1].GetIsPublicWildcard() || viewer.SubjectTypes[2].GetOptionalRelationName() != "member" ||
		viewer.SubjectTypes[3].OptionalCaveatName != "on_weekday" {
		t.Errorf("viewer subject types: %v", viewer.SubjectTypes)
	}
	// SpiceDB sets is_terminal_subject on a plain subject type, always false.
	if term, ok := viewer.SubjectTypes[0].Typeref.(*v1.ReflectionTypeReference_IsTerminalSubject); !ok || term.IsTerminalSubject {
		t.Errorf("viewer subject types: %v", viewer.SubjectTypes)
	}
	if c := resp.Caveats[0]; c.Name != "on_weekday" || len(c.Parameters) != 1 || c.Parameters[0].Type != "string" {
		t.Errorf("caveat: %v", c)
	}
	filtered, err := ts.schema.ReflectSchema(ctxT(t), &v1.ReflectSchemaRequest{OptionalFilters: []*v1.ReflectionSchemaFilter{
		{OptionalDefinitionNameFilter: "doc", OptionalPermissionNameFilter: "vi"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if len(filtered.Definitions) != 1 || len(filtered.Definitions[0].Permissions) != 1 || len(filtered.Definitions[0].Relations) != 0 || len(filtered.Caveats) != 0 {
		t.Errorf("filtered: %v", filtered)
	}

	comp, err := ts.schema.ComputablePermissions(ctxT(t), &v1.ComputablePermissionsRequest{DefinitionName: "folder", RelationName: "owner"})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := refs(comp.Permissions), []string{"document#edit(p)", "document#view(p)", "folder#read(p)"}; !slices.Equal(got, want) {
		t.Errorf("computable from folder#owner: %v, want %v", got, want)
	}
	dep, err := ts.schema.DependentRelations(ctxT(t), &v1.DependentRelationsRequest{DefinitionName: "document", PermissionName: "view"})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := refs(dep.Relations), []string{"document#edit(p)", "document#parent", "document#viewer", "folder#owner", "folder#read(p)", "group#member"}; !slices.Equal(got, want) {
		t.Errorf("view depends on %v, want %v", got, want)
	}
	_, err = ts.schema.DependentRelations(ctxT(t), &v1.DependentRelationsRequest{DefinitionName: "document", PermissionName: "viewer"})
	// SpiceDB's code, reason and text for a relation (issue 30, item 9).
	st := wantCode(t, err, codes.InvalidArgument, v1.ErrorReason_ERROR_REASON_UNKNOWN_RELATION_OR_PERMISSION)
	if !strings.HasPrefix(st.Message(), "the relation `viewer` is not a permission") {
		t.Errorf("DependentRelations of a relation: %q", st.Message())
	}
	_, err = ts.schema.ComputablePermissions(ctxT(t), &v1.ComputablePermissionsRequest{DefinitionName: "nope", RelationName: "x"})
	wantCode(t, err, codes.FailedPrecondition, v1.ErrorReason_ERROR_REASON_SCHEMA_TYPE_ERROR)

	diff, err := ts.schema.DiffSchema(ctxT(t), &v1.DiffSchemaRequest{ComparisonSchema: `definition user {}
definition group {
	relation member: user
}
caveat on_weekday(day string, tz string) {
	day != "sat" && tz != ""
}
definition document {
	relation viewer: user
	permission view = viewer
}`})
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, d := range diff.Diffs {
		kinds = append(kinds, string(d.ProtoReflect().WhichOneof(d.ProtoReflect().Descriptor().Oneofs().ByName("diff")).Name()))
	}
	want := []string{
		"definition_removed", "definition_doc_comment_changed", "relation_subject_type_removed", "relation_removed",
		"permission_removed", "relation_subject_type_removed", "relation_subject_type_removed", "relation_subject_type_removed",
		"permission_expr_changed", "caveat_expr_changed", "caveat_parameter_added",
	}
	if !slices.Equal(kinds, want) {
		t.Errorf("diffs %v\nwant %v", kinds, want)
	}

	exp := v1.NewExperimentalServiceClient(ts.conn)
	eresp, err := exp.ExperimentalDependentRelations(ctxT(t), &v1.ExperimentalDependentRelationsRequest{DefinitionName: "folder", PermissionName: "read"})
	if err != nil || len(eresp.Relations) != 1 || eresp.Relations[0].RelationName != "owner" {
		t.Errorf("ExperimentalDependentRelations: %v, %v", eresp, err)
	}
}

// readSchemaCases are schemas and the text SpiceDB 1.56's ReadSchema returns for each
// (taken from it): caveats then definitions, each sorted by name; caveat parameters
// sorted by name; caveat expressions as CEL prints them, wrapped past column 80;
// SpiceDB's parentheses and `.any(`; comments in its layout, a commented member set
// off by a blank line; no final newline.
var readSchemaCases = []struct{ name, schema, want string }{
	{"order and parentheses", `use expiration

/** zeta doc */
definition zeta {
  relation rrr: user with expiration
}

caveat b_cav(z string, a int, m list<string>) {
  a > 1 && z == "x" && "q" in m
}

// a user
definition user {}

/** caveat a */
caveat a_cav(x int) {
  x == 1
}

definition org/team {
  // members
  relation member: user | org/team#member | zeta#rrr
  relation banned: user:* with a_cav
  permission okk = member - (banned & member) + zeta
  relation zeta: zeta
}`, "use expiration\n\n/** caveat a */\ncaveat a_cav(x int) {\n\tx == 1\n}\n\n" +
		"caveat b_cav(a int, m list<string>, z string) {\n\ta > 1 && z == \"x\" && \"q\" in m\n}\n\n" +
		"definition org/team {\n\t// members\n\trelation member: user | org/team#member | zeta#rrr\n\trelation banned: user:* with a_cav\n" +
		"\tpermission okk = member - ((banned & member) + zeta)\n\trelation zeta: zeta\n}\n\n" +
		"// a user\ndefinition user {}\n\n/** zeta doc */\ndefinition zeta {\n\trelation rrr: user with expiration\n}"},
	{"comments and caveat expressions", `/** first
  second
     third */
definition bbb {
  /** rel doc */
  relation rrr: aaa
  relation sss: aaa
  // line one
  //line two   
  relation ttt: aaa
  /* block
     two */
  permission ppp = rrr + sss.any(ppp)
  permission qqq = sss
}

/*
 * star style
 */
definition aaa {
  relation sss: bbb
}

caveat hours(now timestamp, open list<int>, cfg map<list<string>>) {
  now.getHours() in open &&
    cfg["x"] == ["}"] && {"a": 1}["a"] == 1 && open.all(h, h >= 0 && h < 24) && (open.size() > 2 ? true : false)
}`, "caveat hours(cfg map<list<string>>, now timestamp, open list<int>) {\n" +
		"\tnow.getHours() in open && cfg[\"x\"] == [\"}\"] && {\"a\": 1}[\"a\"] == 1 && open.all(h, h >= 0 &&\n" +
		"\th < 24) && ((open.size() > 2) ? true : false)\n}\n\n" +
		"/* star style */\ndefinition aaa {\n\trelation sss: bbb\n}\n\n" +
		"/**\n * first\n * second\n * third\n */\ndefinition bbb {\n\t/** rel doc */\n\trelation rrr: aaa\n\trelation sss: aaa\n\n" +
		"\t// line one\n\t// line two\n\trelation ttt: aaa\n\n\t/*\n\t * block\n\t * two\n\t */\n" +
		"\tpermission ppp = rrr + sss.any(ppp)\n\tpermission qqq = sss\n}"},
}

func TestReadSchemaAsSpiceDB(t *testing.T) {
	for _, tc := range readSchemaCases {
		t.Run(tc.name, func(t *testing.T) {
			ts := start(t, nil)
			ts.writeSchema(t, tc.schema)
			resp, err := ts.schema.ReadSchema(ctxT(t), &v1.ReadSchemaRequest{})
			if err != nil {
				t.Fatal(err)
			}
			if got := resp.GetSchemaText(); got != tc.want {
				t.Errorf("ReadSchema:\n%q\nwant (SpiceDB's):\n%q", got, tc.want)
			}
		})
	}
}

// ReflectSchema, like SpiceDB's, sorts caveats and their parameters by name and
// gives comments as written, each line trimmed.
func TestReflectSchemaAsSpiceDB(t *testing.T) {
	ts := start(t, nil)
	ts.writeSchema(t, readSchemaCases[0].schema)
	refl, err := ts.schema.ReflectSchema(ctxT(t), &v1.ReflectSchemaRequest{Consistency: fullyConsistent()})
	if err != nil {
		t.Fatal(err)
	}
	var params []string
	for _, p := range refl.Caveats[1].Parameters {
		params = append(params, p.Name)
	}
	if refl.Caveats[0].Name != "a_cav" || !slices.Equal(params, []string{"a", "m", "z"}) {
		t.Errorf("reflected caveats %v, want a_cav first and b_cav's parameters sorted by name", refl.Caveats)
	}
	ts.writeSchema(t, readSchemaCases[1].schema)
	if refl, err = ts.schema.ReflectSchema(ctxT(t), &v1.ReflectSchemaRequest{Consistency: fullyConsistent()}); err != nil {
		t.Fatal(err)
	}
	if got := refl.Definitions[1].Comment; got != "/** first\nsecond\nthird */" {
		t.Errorf("reflected comment %q, want the comment as written, each line trimmed", got)
	}
	if got := refl.Caveats[0].Expression; !strings.HasPrefix(got, "now.getHours() in open && cfg[") || !strings.Contains(got, "&&\nh < 24)") {
		t.Errorf("reflected caveat expression %q, want CEL's printing, unindented", got)
	}
}
