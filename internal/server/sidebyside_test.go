package server

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "github.com/authzed/authzed-go/proto/authzed/api/v1"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"
)

// sbsSchema is the schema most side-by-side operations run against.
const sbsSchema = `caveat is_weekday(day string) {
	day != "saturday" && day != "sunday"
}

caveat ts_less_than(ts timestamp) {
	ts < timestamp("2023-10-11T10:00:00.000Z")
}

definition user {}

definition group {
	relation member: user | user with ts_less_than | group#member
}

definition folder {
	relation viewer: user | group#member
	permission view = viewer
}

definition document {
	relation parent: folder
	relation owner: user
	relation viewer: user | user:* | user with is_weekday | group#member
	relation banned: user
	permission edit = owner
	permission view = (viewer + owner + parent->view) - banned
}`

// sbsAllowed are the operations whose outcome may differ between SpiceDB and latch,
// each with the reason. Every other operation must agree on code, ErrorReason and
// message (and, when it succeeds, on its answer), except that latch's message may go
// on after SpiceDB's whole text where it says more (issue 30: SpiceDB's text stays the
// prefix). An entry with same set allows messages that agree up to and including same
// (and in code and reason); one without allows any difference.
var sbsAllowed = map[string]struct{ why, same string }{
	"WriteSchema parse error: missing brace": {why: "SpiceDB's lexer reports an unclosed definition at 1:1 as an error token; latch reports the end of the text where `}` is missing"},
	"DiffSchema parse error":                 {why: "as for WriteSchema parse error: missing brace"},
	"WriteSchema parse error: unexpected token": {
		why:  "the positions agree; SpiceDB names its lexer's token types, latch says what it expected in the language's words",
		same: "parse error in `schema`, line 3, column 18: ",
	},
	"WriteSchema parse error: bad permission expression": {
		why:  "the positions agree; SpiceDB names its lexer's token types, latch says what it expected in the language's words",
		same: "parse error in `schema`, line 5, column 1: ",
	},
	"WriteSchema type error: duplicate definition": {why: "SpiceDB points at the `definition` keyword and names the reused name last; latch points at the name and says where it was first defined"},
	"WriteSchema type error: unknown subject type": {why: "the same fact in other words: latch names the relation's definition and the position"},
	"WriteSchema type error: duplicate relation":   {why: "the same fact in other words: latch says where the name was first defined and the position"},
	"WriteSchema unknown caveat on a relation":     {why: "the same fact in other words: latch names the relation's definition and the position"},
	"WriteSchema caveat type error: unknown parameter": {
		why:  "SpiceDB appends CEL's source snippet, empty because it compiles the expression without its text",
		same: "undeclared reference to 'b' (in container '')",
	},
	"WriteRelationships caveat context of the wrong type":    {why: "SpiceDB answers UNKNOWN without a reason (an unclassified error; its log says `received unexpected error`); latch answers INVALID_ARGUMENT with CAVEAT_PARAMETER_TYPE_ERROR, as SpiceDB does for the same context at check time"},
	"WriteRelationships caveat context with an unknown key":  {why: "as for a context of the wrong type: SpiceDB's UNKNOWN is its unclassified error"},
	"CheckPermission caveat without context":                 {why: "SpiceDB lists the missing parameter once per path to the caveat (`day,day`); latch once"},
	"CheckPermission at_exact_snapshot with a SpiceDB token": {why: "latch cannot place SpiceDB's revision in its own history: it refuses with FAILED_PRECONDITION where SpiceDB reads its snapshot (README, ZedTokens)"},
	"ReadRelationships garbage cursor": {
		why:  "SpiceDB reports the base64 decoder's error; latch says why the cursor is not one of its own",
		same: "error decoding cursor: ",
	},
	"Watch garbage cursor": {
		why:  "SpiceDB reports the base64 decoder's error; latch says why the token is not one it can read",
		same: "failed to decode start revision: ",
	},
	"RegisterRelationshipCounter empty name": {why: "SpiceDB attaches an ErrorInfo whose reason is ERROR_REASON_UNSPECIFIED; latch attaches none when there is no reason"},
}

// sbsEnv is one server under comparison and the state its operations keep.
type sbsEnv struct {
	api  authzAPI
	exp  v1.ExperimentalServiceClient
	wat  v1.WatchServiceClient
	last *v1.ZedToken // the token of the last write
}

// sbsOp is one call made on both servers; run returns a rendering of a successful
// answer (compared too) or the call's error.
type sbsOp struct {
	name string
	run  func(context.Context, *sbsEnv) (string, error)
}

// TestSideBySide runs a fixed list of operations, error cases among them, against
// SpiceDB and latch in lockstep and compares every outcome: code, ErrorReason and
// message of each error, and the answer of each success. sbsAllowed lists the
// differences that are known and kept, each with its reason.
func TestSideBySide(t *testing.T) {
	spicedb := startSpiceDB(t)
	ls := start(t, nil)
	envs := []*sbsEnv{
		{api: spicedb, exp: v1.NewExperimentalServiceClient(spicedb.conn), wat: v1.NewWatchServiceClient(spicedb.conn)},
		{
			api: authzAPI{name: "latch", schema: ls.schema, perms: ls.perms, conn: ls.conn, addr: ls.grpcAddr},
			exp: v1.NewExperimentalServiceClient(ls.conn), wat: v1.NewWatchServiceClient(ls.conn),
		},
	}
	ops := sbsOps(envs[0])
	t.Logf("%d operations", len(ops))
	if len(ops) < 90 {
		t.Fatalf("only %d operations", len(ops))
	}
	used := map[string]bool{}
	names := map[string]bool{}
	for _, op := range ops {
		if names[op.name] {
			t.Fatalf("two operations named %q", op.name)
		}
		names[op.name] = true
		var outcomes [2]sbsResult
		for i, env := range envs {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			answer, err := op.run(ctx, env)
			cancel()
			outcomes[i] = sbsOutcome(answer, err)
		}
		spicedb, latch := outcomes[0], outcomes[1]
		if spicedb == latch {
			continue
		}
		if spicedb.sameKind(latch) && spicedb.msg != "" && strings.HasPrefix(latch.msg, spicedb.msg) {
			t.Logf("%s: latch's message goes on after SpiceDB's: %q", op.name, latch.msg[len(spicedb.msg):])
			continue
		}
		if allowed, ok := sbsAllowed[op.name]; ok {
			used[op.name] = true
			if allowed.same != "" && (!spicedb.sameKind(latch) || !sameUpTo(spicedb.msg, latch.msg, allowed.same)) {
				t.Errorf("%s: the messages must agree up to %q\nSpiceDB: %s\nlatch:   %s", op.name, allowed.same, spicedb, latch)
				continue
			}
			t.Logf("%s (allowed: %s)\nSpiceDB: %s\nlatch:   %s", op.name, allowed.why, spicedb, latch)
			continue
		}
		t.Errorf("%s\nSpiceDB: %s\nlatch:   %s", op.name, spicedb, latch)
	}
	for name := range sbsAllowed {
		if !used[name] {
			t.Errorf("allow-list entry %q: the servers agree (or no such operation); remove it", name)
		}
	}
}

// sbsResult is an outcome: the answer, or the code, reason and message.
type sbsResult struct {
	code   codes.Code
	reason string // "-" without an ErrorInfo
	msg    string
	answer string
}

func (r sbsResult) String() string {
	if r.code == codes.OK {
		return "OK " + r.answer
	}
	return fmt.Sprintf("%s %s %q", r.code, r.reason, r.msg)
}

func (r sbsResult) sameKind(o sbsResult) bool { return r.code == o.code && r.reason == o.reason }

func sbsOutcome(answer string, err error) sbsResult {
	if err == nil {
		return sbsResult{answer: answer}
	}
	st := status.Convert(err)
	r := sbsResult{code: st.Code(), reason: "-", msg: st.Message()}
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			r.reason = info.GetReason()
		}
	}
	return r
}

// sameUpTo reports whether a and b are equal up to the end of the first occurrence
// of part in a.
func sameUpTo(a, b, part string) bool {
	i := strings.Index(a, part)
	return i >= 0 && len(b) >= i+len(part) && a[:i+len(part)] == b[:i+len(part)]
}

// sbsOps lists the operations in the order they run; spicedb's state gives the
// operations that use a token SpiceDB issued.
func sbsOps(spicedb *sbsEnv) []sbsOp {
	var ops []sbsOp
	ops = append(ops, sbsSchemaOps()...)
	ops = append(ops, sbsWriteOps()...)
	ops = append(ops, sbsCheckOps(spicedb)...)
	ops = append(ops, sbsLookupOps()...)
	ops = append(ops, sbsReadOps()...)
	ops = append(ops, sbsReflectOps()...)
	ops = append(ops, sbsCounterOps()...)
	ops = append(ops, sbsWatchOps()...)
	ops = append(ops, sbsAuthOps()...)
	return ops
}

func writeSchemaOp(name, text string) sbsOp {
	return sbsOp{"WriteSchema " + name, func(ctx context.Context, e *sbsEnv) (string, error) {
		resp, err := e.api.schema.WriteSchema(ctx, &v1.WriteSchemaRequest{Schema: text})
		if err == nil {
			e.last = resp.GetWrittenAt()
		}
		return "", err
	}}
}

func sbsSchemaOps() []sbsOp {
	return []sbsOp{
		{"ReadSchema before any schema", func(ctx context.Context, e *sbsEnv) (string, error) {
			_, err := e.api.schema.ReadSchema(ctx, &v1.ReadSchemaRequest{})
			return "", err
		}},
		writeSchemaOp("parse error: missing brace", "definition user {}\ndefinition doc {\n\trelation viewer: user\n"),
		writeSchemaOp("parse error: unexpected token", "definition user {}\ndefinition doc {\n\trelation viewer user\n}"),
		writeSchemaOp("parse error: bad permission expression", "definition user {}\ndefinition doc {\n\trelation viewer: user\n\tpermission view = viewer +\n}"),
		writeSchemaOp("type error: unknown relation in permission", "definition user {}\ndefinition doc {\n\trelation viewer: user\n\tpermission view = viewer + editor\n}"),
		writeSchemaOp("type error: unknown subject type", "definition doc {\n\trelation viewer: user\n}"),
		writeSchemaOp("type error: duplicate relation", "definition user {}\ndefinition doc {\n\trelation viewer: user\n\trelation viewer: user\n}"),
		writeSchemaOp("type error: duplicate definition", "definition user {}\ndefinition user {}"),
		writeSchemaOp("caveat type error: int compared with string", "caveat c(a int) {\n\ta == \"x\"\n}\ndefinition user {}"),
		writeSchemaOp("caveat type error: unknown parameter", "caveat c(a int) {\n\tb == 1\n}\ndefinition user {}"),
		writeSchemaOp("caveat type error: not a bool", "caveat c(a int) {\n\ta + 1\n}\ndefinition user {}"),
		writeSchemaOp("caveat type error: unknown parameter type", "caveat c(a integer) {\n\ta == 1\n}\ndefinition user {}"),
		writeSchemaOp("unknown caveat on a relation", "definition user {}\ndefinition doc {\n\trelation viewer: user with nope\n}"),
		writeSchemaOp("empty", ""),
		writeSchemaOp("valid", sbsSchema),
		{"ReadSchema", func(ctx context.Context, e *sbsEnv) (string, error) {
			_, err := e.api.schema.ReadSchema(ctx, &v1.ReadSchemaRequest{})
			return "", err
		}},
	}
}

// sbsRel parses a relationship in SpiceDB's syntax: `document:d1#viewer@user:u1`,
// with an optional `[caveat:{json}]` or `[caveat]`.
func sbsRel(s string) *v1.Relationship {
	var caveat *v1.ContextualizedCaveat
	if i := strings.Index(s, "["); i >= 0 {
		name, ctxJSON, _ := strings.Cut(strings.TrimSuffix(s[i+1:], "]"), ":")
		caveat = &v1.ContextualizedCaveat{CaveatName: name}
		if ctxJSON != "" {
			st := &structpb.Struct{}
			if err := st.UnmarshalJSON([]byte(ctxJSON)); err != nil {
				panic(err)
			}
			caveat.Context = st
		}
		s = s[:i]
	}
	res, subj, _ := strings.Cut(s, "@")
	resObj, relation, _ := strings.Cut(res, "#")
	rt, rid, _ := strings.Cut(resObj, ":")
	subObj, subRel, _ := strings.Cut(subj, "#")
	st, sid, _ := strings.Cut(subObj, ":")
	r := relationship(rt, rid, relation, st, sid, subRel)
	r.OptionalCaveat = caveat
	return r
}

func writeOp(name string, preconds []*v1.Precondition, updates ...*v1.RelationshipUpdate) sbsOp {
	return sbsOp{"WriteRelationships " + name, func(ctx context.Context, e *sbsEnv) (string, error) {
		resp, err := e.api.perms.WriteRelationships(ctx, &v1.WriteRelationshipsRequest{Updates: updates, OptionalPreconditions: preconds})
		if err == nil {
			e.last = resp.GetWrittenAt()
		}
		return "", err
	}}
}

func upd(op v1.RelationshipUpdate_Operation, r string) *v1.RelationshipUpdate {
	return update(op, sbsRel(r))
}

const (
	opTouch  = v1.RelationshipUpdate_OPERATION_TOUCH
	opCreate = v1.RelationshipUpdate_OPERATION_CREATE
	opDelete = v1.RelationshipUpdate_OPERATION_DELETE
)

func precondition(op v1.Precondition_Operation, f *v1.RelationshipFilter) []*v1.Precondition {
	return []*v1.Precondition{{Operation: op, Filter: f}}
}

func sbsWriteOps() []sbsOp {
	mustMatch, mustNotMatch := v1.Precondition_OPERATION_MUST_MATCH, v1.Precondition_OPERATION_MUST_NOT_MATCH
	return []sbsOp{
		writeOp("touch", nil,
			upd(opTouch, "document:d1#viewer@user:anne"),
			upd(opTouch, "document:d1#owner@user:bob"),
			upd(opTouch, "document:d1#parent@folder:f1"),
			upd(opTouch, "folder:f1#viewer@group:g1#member"),
			upd(opTouch, "group:g1#member@user:carl"),
			upd(opTouch, "group:g2#member@user:dana[ts_less_than]"),
			upd(opTouch, "document:d2#viewer@user:*"),
			upd(opTouch, "document:d2#banned@user:eve"),
			upd(opTouch, "document:d3#viewer@user:fred[is_weekday]"),
			upd(opTouch, "document:d4#viewer@user:gina[is_weekday:{\"day\":\"monday\"}]"),
			upd(opTouch, "document:d5#viewer@group:g2#member"),
		),
		writeOp("create of an existing relationship", nil, upd(opCreate, "document:d1#viewer@user:anne")),
		writeOp("create of a new relationship", nil, upd(opCreate, "document:d6#viewer@user:anne")),
		writeOp("touch an existing relationship", nil, upd(opTouch, "document:d1#viewer@user:anne")),
		writeOp("delete of a missing relationship", nil, upd(opDelete, "document:d9#viewer@user:nobody")),
		writeOp("precondition must match fails", precondition(mustMatch, &v1.RelationshipFilter{ResourceType: "document", OptionalResourceId: "nope"}),
			upd(opTouch, "document:d7#viewer@user:anne")),
		writeOp("precondition must not match fails", precondition(mustNotMatch, &v1.RelationshipFilter{ResourceType: "document", OptionalRelation: "owner"}),
			upd(opTouch, "document:d7#viewer@user:anne")),
		writeOp("precondition with subject filter fails", precondition(mustMatch, &v1.RelationshipFilter{ResourceType: "document", OptionalSubjectFilter: &v1.SubjectFilter{SubjectType: "user", OptionalSubjectId: "zed"}}),
			upd(opTouch, "document:d7#viewer@user:anne")),
		writeOp("precondition must match holds", precondition(mustMatch, &v1.RelationshipFilter{ResourceType: "document", OptionalResourceId: "d1"}),
			upd(opTouch, "document:d7#viewer@user:anne")),
		writeOp("empty precondition", precondition(mustMatch, &v1.RelationshipFilter{}), upd(opTouch, "document:d7#viewer@user:anne")),
		writeOp("unknown resource type", nil, upd(opTouch, "nope:x#viewer@user:anne")),
		writeOp("unknown relation", nil, upd(opTouch, "document:d1#nope@user:anne")),
		writeOp("to a permission", nil, upd(opTouch, "document:d1#view@user:anne")),
		writeOp("subject type not allowed", nil, upd(opTouch, "document:d1#owner@folder:f1")),
		writeOp("subject relation not allowed", nil, upd(opTouch, "document:d1#viewer@folder:f1#viewer")),
		writeOp("wildcard not allowed", nil, upd(opTouch, "document:d1#owner@user:*")),
		writeOp("unknown subject type", nil, upd(opTouch, "document:d1#viewer@nope:x")),
		writeOp("caveat not allowed", nil, upd(opTouch, "document:d1#owner@user:anne[is_weekday]")),
		writeOp("unknown caveat", nil, upd(opTouch, "document:d1#viewer@user:anne[nope]")),
		writeOp("caveat context of the wrong type", nil, upd(opTouch, "document:d1#viewer@user:hank[is_weekday:{\"day\":42}]")),
		writeOp("caveat context with an unknown key", nil, upd(opTouch, "document:d1#viewer@user:hank[is_weekday:{\"hour\":\"x\"}]")),
		writeOp("caveat required", nil, upd(opTouch, "group:g3#member@user:anne[is_weekday]")),
		writeOp("same relationship twice", nil, upd(opTouch, "document:d1#viewer@user:ivan"), upd(opDelete, "document:d1#viewer@user:ivan")),
		writeOp("bad object id", nil, upd(opTouch, "document:d 1#viewer@user:anne")),
		writeOp("bad type name", nil, upd(opTouch, "Document:d1#viewer@user:anne")),
		writeOp("no updates", nil),
		writeOp("missing operation", nil, &v1.RelationshipUpdate{Relationship: sbsRel("document:d1#viewer@user:anne")}),
		{"DeleteRelationships over the limit", func(ctx context.Context, e *sbsEnv) (string, error) {
			_, err := e.api.perms.DeleteRelationships(ctx, &v1.DeleteRelationshipsRequest{
				RelationshipFilter: &v1.RelationshipFilter{ResourceType: "document"}, OptionalLimit: 1,
			})
			return "", err
		}},
		{"DeleteRelationships with an unknown type", func(ctx context.Context, e *sbsEnv) (string, error) {
			_, err := e.api.perms.DeleteRelationships(ctx, &v1.DeleteRelationshipsRequest{RelationshipFilter: &v1.RelationshipFilter{ResourceType: "nope"}})
			return "", err
		}},
		{"DeleteRelationships with an unknown relation", func(ctx context.Context, e *sbsEnv) (string, error) {
			_, err := e.api.perms.DeleteRelationships(ctx, &v1.DeleteRelationshipsRequest{RelationshipFilter: &v1.RelationshipFilter{ResourceType: "document", OptionalRelation: "nope"}})
			return "", err
		}},
		{"DeleteRelationships with a failing precondition", func(ctx context.Context, e *sbsEnv) (string, error) {
			_, err := e.api.perms.DeleteRelationships(ctx, &v1.DeleteRelationshipsRequest{
				RelationshipFilter:    &v1.RelationshipFilter{ResourceType: "document", OptionalResourceId: "d7"},
				OptionalPreconditions: precondition(mustNotMatch, &v1.RelationshipFilter{ResourceType: "document", OptionalResourceId: "d7"}),
			})
			return "", err
		}},
		{"DeleteRelationships d7", func(ctx context.Context, e *sbsEnv) (string, error) {
			resp, err := e.api.perms.DeleteRelationships(ctx, &v1.DeleteRelationshipsRequest{RelationshipFilter: &v1.RelationshipFilter{ResourceType: "document", OptionalResourceId: "d7"}})
			return fmt.Sprint(resp.GetDeletionProgress()), err
		}},
	}
}

func checkOp(name string, c func(*sbsEnv) *v1.Consistency, resource, perm, subject string, caveatCtx string) sbsOp {
	return sbsOp{"CheckPermission " + name, func(ctx context.Context, e *sbsEnv) (string, error) {
		s := sbsRel(resource + "#" + perm + "@" + subject)
		req := &v1.CheckPermissionRequest{Resource: s.Resource, Permission: perm, Subject: s.Subject, Consistency: fullyConsistent()}
		if c != nil {
			req.Consistency = c(e)
		}
		if caveatCtx != "" {
			req.Context = &structpb.Struct{}
			if err := req.Context.UnmarshalJSON([]byte(caveatCtx)); err != nil {
				panic(err)
			}
		}
		resp, err := e.api.perms.CheckPermission(ctx, req)
		return resp.GetPermissionship().String() + " missing " + strings.Join(resp.GetPartialCaveatInfo().GetMissingRequiredContext(), ","), err
	}}
}

func atLeastAsFresh(tok string) *v1.Consistency {
	return &v1.Consistency{Requirement: &v1.Consistency_AtLeastAsFresh{AtLeastAsFresh: &v1.ZedToken{Token: tok}}}
}

func atExactSnapshot(tok string) *v1.Consistency {
	return &v1.Consistency{Requirement: &v1.Consistency_AtExactSnapshot{AtExactSnapshot: &v1.ZedToken{Token: tok}}}
}

func sbsCheckOps(spicedb *sbsEnv) []sbsOp {
	own := func(e *sbsEnv) *v1.Consistency { return atLeastAsFresh(e.last.GetToken()) }
	fromSpiceDB := func(*sbsEnv) *v1.Consistency { return atLeastAsFresh(spicedb.last.GetToken()) }
	exactFromSpiceDB := func(*sbsEnv) *v1.Consistency { return atExactSnapshot(spicedb.last.GetToken()) }
	garbage := func(*sbsEnv) *v1.Consistency { return atLeastAsFresh("not a token") }
	garbageExact := func(*sbsEnv) *v1.Consistency { return atExactSnapshot("bm90IGEgdG9rZW4=") }
	return []sbsOp{
		checkOp("direct", nil, "document:d1", "view", "user:anne", ""),
		checkOp("owner", nil, "document:d1", "edit", "user:bob", ""),
		checkOp("through a folder and a group", nil, "document:d1", "view", "user:carl", ""),
		checkOp("no permission", nil, "document:d1", "edit", "user:anne", ""),
		checkOp("wildcard", nil, "document:d2", "view", "user:zoe", ""),
		checkOp("wildcard excluded", nil, "document:d2", "view", "user:eve", ""),
		checkOp("caveat without context", nil, "document:d3", "view", "user:fred", ""),
		checkOp("caveat with context", nil, "document:d3", "view", "user:fred", `{"day":"monday"}`),
		checkOp("caveat false", nil, "document:d3", "view", "user:fred", `{"day":"sunday"}`),
		checkOp("caveat with its context stored", nil, "document:d4", "view", "user:gina", ""),
		checkOp("caveat context of the wrong type", nil, "document:d3", "view", "user:fred", `{"day":7}`),
		checkOp("caveat context list for a string", nil, "document:d3", "view", "user:fred", `{"day":["monday"]}`),
		checkOp("malformed timestamp", nil, "document:d5", "view", "user:dana", `{"ts":"2023-10-11T11:00.000Z"}`),
		checkOp("timestamp of the wrong type", nil, "document:d5", "view", "user:dana", `{"ts":12}`),
		checkOp("timestamp", nil, "document:d5", "view", "user:dana", `{"ts":"2023-10-11T09:00:00Z"}`),
		checkOp("unknown resource type", nil, "nope:x", "view", "user:anne", ""),
		checkOp("unknown permission", nil, "document:d1", "nope", "user:anne", ""),
		checkOp("unknown subject type", nil, "document:d1", "view", "nope:x", ""),
		checkOp("subject relation unknown", nil, "document:d1", "view", "group:g1#nope", ""),
		checkOp("wildcard subject", nil, "document:d1", "view", "user:*", ""),
		checkOp("relation, not permission", nil, "document:d1", "viewer", "user:anne", ""),
		checkOp("subject set", nil, "folder:f1", "view", "group:g1#member", ""),
		checkOp("bad resource id", nil, "document:d 1", "view", "user:anne", ""),
		checkOp("at_least_as_fresh own token", own, "document:d1", "view", "user:anne", ""),
		checkOp("at_least_as_fresh with a SpiceDB token", fromSpiceDB, "document:d1", "view", "user:anne", ""),
		checkOp("at_exact_snapshot with a SpiceDB token", exactFromSpiceDB, "document:d1", "view", "user:anne", ""),
		checkOp("at_least_as_fresh garbage token", garbage, "document:d1", "view", "user:anne", ""),
		checkOp("at_exact_snapshot garbage token", garbageExact, "document:d1", "view", "user:anne", ""),
		// No minimize_latency check: its revision is each server's quantized one, whose
		// phase the test does not control, so a check soon after the schema write may
		// find no schema on one server and a schema on the other.
		{"CheckBulkPermissions mixed", func(ctx context.Context, e *sbsEnv) (string, error) {
			item := func(res, perm, subject string) *v1.CheckBulkPermissionsRequestItem {
				s := sbsRel(res + "#" + perm + "@" + subject)
				return &v1.CheckBulkPermissionsRequestItem{Resource: s.Resource, Permission: perm, Subject: s.Subject}
			}
			resp, err := e.api.perms.CheckBulkPermissions(ctx, &v1.CheckBulkPermissionsRequest{Consistency: fullyConsistent(), Items: []*v1.CheckBulkPermissionsRequestItem{
				item("document:d1", "view", "user:anne"), item("document:d1", "nope", "user:anne"), item("nope:x", "view", "user:anne"), item("document:d3", "view", "user:fred"),
			}})
			var out []string
			for _, p := range resp.GetPairs() {
				if p.GetError() != nil {
					out = append(out, fmt.Sprintf("error %d %q", p.GetError().GetCode(), p.GetError().GetMessage()))
				} else {
					out = append(out, p.GetItem().GetPermissionship().String())
				}
			}
			return strings.Join(out, "; "), err
		}},
		{"CheckBulkPermissions empty", func(ctx context.Context, e *sbsEnv) (string, error) {
			_, err := e.api.perms.CheckBulkPermissions(ctx, &v1.CheckBulkPermissionsRequest{Consistency: fullyConsistent()})
			return "", err
		}},
		{"ExpandPermissionTree unknown permission", func(ctx context.Context, e *sbsEnv) (string, error) {
			_, err := e.api.perms.ExpandPermissionTree(ctx, &v1.ExpandPermissionTreeRequest{Consistency: fullyConsistent(), Resource: obj("document", "d1"), Permission: "nope"})
			return "", err
		}},
		{"ExpandPermissionTree unknown type", func(ctx context.Context, e *sbsEnv) (string, error) {
			_, err := e.api.perms.ExpandPermissionTree(ctx, &v1.ExpandPermissionTreeRequest{Consistency: fullyConsistent(), Resource: obj("nope", "d1"), Permission: "view"})
			return "", err
		}},
		{"ExpandPermissionTree", func(ctx context.Context, e *sbsEnv) (string, error) {
			_, err := e.api.perms.ExpandPermissionTree(ctx, &v1.ExpandPermissionTreeRequest{Consistency: fullyConsistent(), Resource: obj("document", "d1"), Permission: "edit"})
			return "", err
		}},
	}
}

func lookupResourcesOp(name, typ, perm, subject, caveatCtx string, limit uint32) sbsOp {
	return sbsOp{"LookupResources " + name, func(ctx context.Context, e *sbsEnv) (string, error) {
		s := sbsRel("x:x#x@" + subject)
		req := &v1.LookupResourcesRequest{Consistency: fullyConsistent(), ResourceObjectType: typ, Permission: perm, Subject: s.Subject, OptionalLimit: limit}
		if caveatCtx != "" {
			req.Context = &structpb.Struct{}
			if err := req.Context.UnmarshalJSON([]byte(caveatCtx)); err != nil {
				panic(err)
			}
		}
		resps, err := drain(e.api.perms.LookupResources(ctx, req))
		var found []string
		for _, r := range resps {
			found = append(found, r.GetResourceObjectId()+conditional(r.GetPermissionship()))
		}
		if limit > 0 {
			return fmt.Sprint(len(found)), err
		}
		return setText(found), err
	}}
}

func lookupSubjectsOp(name, resource, perm, subjectType, caveatCtx string) sbsOp {
	return sbsOp{"LookupSubjects " + name, func(ctx context.Context, e *sbsEnv) (string, error) {
		r := sbsRel(resource + "#" + perm + "@x:x")
		typ, relation, _ := strings.Cut(subjectType, "#")
		req := &v1.LookupSubjectsRequest{Consistency: fullyConsistent(), Resource: r.Resource, Permission: perm, SubjectObjectType: typ, OptionalSubjectRelation: relation}
		if caveatCtx != "" {
			req.Context = &structpb.Struct{}
			if err := req.Context.UnmarshalJSON([]byte(caveatCtx)); err != nil {
				panic(err)
			}
		}
		resps, err := drain(e.api.perms.LookupSubjects(ctx, req))
		var found []string
		for _, r := range resps {
			found = append(found, r.GetSubject().GetSubjectObjectId()+conditional(r.GetSubject().GetPermissionship()))
		}
		return setText(found), err
	}}
}

func sbsLookupOps() []sbsOp {
	return []sbsOp{
		lookupResourcesOp("view for anne", "document", "view", "user:anne", "", 0),
		lookupResourcesOp("view for carl", "document", "view", "user:carl", "", 0),
		lookupResourcesOp("view for fred, caveated", "document", "view", "user:fred", "", 0),
		lookupResourcesOp("view for fred on monday", "document", "view", "user:fred", `{"day":"monday"}`, 0),
		lookupResourcesOp("with a wrongly typed context", "document", "view", "user:fred", `{"day":1}`, 0),
		lookupResourcesOp("unknown type", "nope", "view", "user:anne", "", 0),
		lookupResourcesOp("unknown permission", "document", "nope", "user:anne", "", 0),
		lookupResourcesOp("unknown subject type", "document", "view", "nope:x", "", 0),
		lookupResourcesOp("wildcard subject", "document", "view", "user:*", "", 0),
		lookupResourcesOp("limit 1", "document", "view", "user:anne", "", 1),
		lookupSubjectsOp("view users of d1", "document:d1", "view", "user", ""),
		lookupSubjectsOp("view users of d2", "document:d2", "view", "user", ""),
		lookupSubjectsOp("view users of d3", "document:d3", "view", "user", ""),
		lookupSubjectsOp("group subject sets of f1", "folder:f1", "view", "group#member", ""),
		lookupSubjectsOp("unknown permission", "document:d1", "nope", "user", ""),
		lookupSubjectsOp("unknown subject type", "document:d1", "view", "nope", ""),
		lookupSubjectsOp("unknown subject relation", "document:d1", "view", "group#nope", ""),
		lookupSubjectsOp("unknown resource type", "nope:d1", "view", "user", ""),
		lookupSubjectsOp("with a wrongly typed context", "document:d3", "view", "user", `{"day":1}`),
	}
}

func readOp(name string, f *v1.RelationshipFilter, limit uint32, cursor *v1.Cursor) sbsOp {
	return sbsOp{"ReadRelationships " + name, func(ctx context.Context, e *sbsEnv) (string, error) {
		resps, err := drain(e.api.perms.ReadRelationships(ctx, &v1.ReadRelationshipsRequest{
			Consistency: fullyConsistent(), RelationshipFilter: f, OptionalLimit: limit, OptionalCursor: cursor,
		}))
		var found []string
		for _, r := range resps {
			x := r.GetRelationship()
			found = append(found, fmt.Sprintf("%s:%s#%s@%s:%s", x.GetResource().GetObjectType(), x.GetResource().GetObjectId(), x.GetRelation(), x.GetSubject().GetObject().GetObjectType(), x.GetSubject().GetObject().GetObjectId()))
		}
		return setText(found), err
	}}
}

func sbsReadOps() []sbsOp {
	return []sbsOp{
		readOp("d1", &v1.RelationshipFilter{ResourceType: "document", OptionalResourceId: "d1"}, 0, nil),
		readOp("by subject", &v1.RelationshipFilter{ResourceType: "document", OptionalSubjectFilter: &v1.SubjectFilter{SubjectType: "user", OptionalSubjectId: "anne"}}, 0, nil),
		readOp("by prefix", &v1.RelationshipFilter{ResourceType: "document", OptionalResourceIdPrefix: "d"}, 0, nil),
		readOp("unknown type", &v1.RelationshipFilter{ResourceType: "nope"}, 0, nil),
		readOp("unknown relation", &v1.RelationshipFilter{ResourceType: "document", OptionalRelation: "nope"}, 0, nil),
		readOp("unknown subject type", &v1.RelationshipFilter{ResourceType: "document", OptionalSubjectFilter: &v1.SubjectFilter{SubjectType: "nope"}}, 0, nil),
		readOp("id and prefix", &v1.RelationshipFilter{ResourceType: "document", OptionalResourceId: "d1", OptionalResourceIdPrefix: "d"}, 0, nil),
		readOp("empty filter", &v1.RelationshipFilter{}, 0, nil),
		readOp("garbage cursor", &v1.RelationshipFilter{ResourceType: "document"}, 1, &v1.Cursor{Token: "garbage"}),
		readOp("limit over the maximum", &v1.RelationshipFilter{ResourceType: "document"}, 5000, nil),
	}
}

func sbsReflectOps() []sbsOp {
	dependent := func(name, def, perm string) sbsOp {
		return sbsOp{"DependentRelations " + name, func(ctx context.Context, e *sbsEnv) (string, error) {
			resp, err := e.api.schema.DependentRelations(ctx, &v1.DependentRelationsRequest{Consistency: fullyConsistent(), DefinitionName: def, PermissionName: perm})
			var out []string
			for _, r := range resp.GetRelations() {
				out = append(out, r.GetDefinitionName()+"#"+r.GetRelationName())
			}
			return setText(out), err
		}}
	}
	computable := func(name, def, relation string) sbsOp {
		return sbsOp{"ComputablePermissions " + name, func(ctx context.Context, e *sbsEnv) (string, error) {
			resp, err := e.api.schema.ComputablePermissions(ctx, &v1.ComputablePermissionsRequest{Consistency: fullyConsistent(), DefinitionName: def, RelationName: relation})
			var out []string
			for _, r := range resp.GetPermissions() {
				out = append(out, r.GetDefinitionName()+"#"+r.GetRelationName())
			}
			return setText(out), err
		}}
	}
	return []sbsOp{
		dependent("of a permission", "document", "view"),
		dependent("of a relation", "document", "viewer"),
		dependent("of an unknown permission", "document", "nope"),
		dependent("of an unknown definition", "nope", "view"),
		computable("of a relation", "group", "member"),
		computable("of an unknown relation", "document", "nope"),
		computable("of an unknown definition", "nope", "viewer"),
		{"DiffSchema", func(ctx context.Context, e *sbsEnv) (string, error) {
			resp, err := e.api.schema.DiffSchema(ctx, &v1.DiffSchemaRequest{Consistency: fullyConsistent(), ComparisonSchema: "definition user {}"})
			return fmt.Sprint(len(resp.GetDiffs())), err
		}},
		{"DiffSchema parse error", func(ctx context.Context, e *sbsEnv) (string, error) {
			_, err := e.api.schema.DiffSchema(ctx, &v1.DiffSchemaRequest{Consistency: fullyConsistent(), ComparisonSchema: "definition user {"})
			return "", err
		}},
		{"ReflectSchema", func(ctx context.Context, e *sbsEnv) (string, error) {
			resp, err := e.api.schema.ReflectSchema(ctx, &v1.ReflectSchemaRequest{Consistency: fullyConsistent()})
			return fmt.Sprint(len(resp.GetDefinitions()), len(resp.GetCaveats())), err
		}},
	}
}

func sbsCounterOps() []sbsOp {
	register := func(name, counter string, f *v1.RelationshipFilter) sbsOp {
		return sbsOp{"RegisterRelationshipCounter " + name, func(ctx context.Context, e *sbsEnv) (string, error) {
			_, err := e.exp.ExperimentalRegisterRelationshipCounter(ctx, &v1.ExperimentalRegisterRelationshipCounterRequest{Name: counter, RelationshipFilter: f})
			return "", err
		}}
	}
	count := func(name, counter string) sbsOp {
		return sbsOp{"CountRelationships " + name, func(ctx context.Context, e *sbsEnv) (string, error) {
			resp, err := e.exp.ExperimentalCountRelationships(ctx, &v1.ExperimentalCountRelationshipsRequest{Name: counter})
			return fmt.Sprint(resp.GetReadCounterValue().GetRelationshipCount()), err
		}}
	}
	unregister := func(name, counter string) sbsOp {
		return sbsOp{"UnregisterRelationshipCounter " + name, func(ctx context.Context, e *sbsEnv) (string, error) {
			_, err := e.exp.ExperimentalUnregisterRelationshipCounter(ctx, &v1.ExperimentalUnregisterRelationshipCounterRequest{Name: counter})
			return "", err
		}}
	}
	docs := &v1.RelationshipFilter{ResourceType: "document"}
	return []sbsOp{
		register("documents", "docs", docs),
		register("again", "docs", docs),
		register("unknown type", "nope", &v1.RelationshipFilter{ResourceType: "nope"}),
		register("empty name", "", docs),
		count("unregistered", "nope"),
		count("documents", "docs"),
		writeOp("more documents", nil, upd(opTouch, "document:c1#viewer@user:anne"), upd(opTouch, "document:c2#viewer@user:anne"), upd(opTouch, "document:c3#viewer@user:anne")),
		count("documents right after writes", "docs"),
		unregister("documents", "docs"),
		unregister("unregistered", "docs"),
		count("after unregistering", "docs"),
	}
}

func sbsWatchOps() []sbsOp {
	watch := func(name string, req *v1.WatchRequest) sbsOp {
		return sbsOp{"Watch " + name, func(ctx context.Context, e *sbsEnv) (string, error) {
			ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			stream, err := e.wat.Watch(ctx, req)
			if err != nil {
				return "", err
			}
			_, err = stream.Recv()
			if status.Code(err) == codes.DeadlineExceeded { // the watch is open and quiet
				return "open", nil
			}
			return "", err
		}}
	}
	return []sbsOp{
		watch("garbage cursor", &v1.WatchRequest{OptionalStartCursor: &v1.ZedToken{Token: "garbage"}}),
		watch("unknown object type", &v1.WatchRequest{OptionalObjectTypes: []string{"nope"}}),
		watch("unknown filter type", &v1.WatchRequest{OptionalRelationshipFilters: []*v1.RelationshipFilter{{ResourceType: "nope"}}}),
		watch("types and filters", &v1.WatchRequest{OptionalObjectTypes: []string{"document"}, OptionalRelationshipFilters: []*v1.RelationshipFilter{{ResourceType: "document"}}}),
	}
}

// sbsAuthOps call with no key and with a wrong one.
func sbsAuthOps() []sbsOp {
	call := func(name, key string) sbsOp {
		return sbsOp{"ReadSchema " + name, func(ctx context.Context, e *sbsEnv) (string, error) {
			opts := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
			if key != "" {
				opts = append(opts, grpc.WithPerRPCCredentials(bearer(key)))
			}
			conn, err := grpc.NewClient(e.api.addr, opts...)
			if err != nil {
				return "", err
			}
			defer conn.Close()
			_, err = v1.NewSchemaServiceClient(conn).ReadSchema(ctx, &v1.ReadSchemaRequest{})
			return "", err
		}}
	}
	return []sbsOp{call("without a key", ""), call("with a wrong key", "wrong-key")}
}
