package apierr

import (
	"context"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	v1 "github.com/authzed/authzed-go/proto/authzed/api/v1"
	"google.golang.org/grpc/codes"

	"github.com/latch-authz/latch/internal/caveat"
	"github.com/latch-authz/latch/internal/engine"
	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/relcounter"
	"github.com/latch-authz/latch/internal/schema"
	"github.com/latch-authz/latch/internal/schema/ir"
	"github.com/latch-authz/latch/internal/schemachange"
	"github.com/latch-authz/latch/internal/server/zedtoken"
	"github.com/latch-authz/latch/internal/store"
)

// domainErrors is one value of every exported sentinel and error type of the domain
// packages, keyed "dir.Name". TestEveryDomainErrorHasARow checks the list against the
// source, so an error added there without a row here (and in the table) fails.
var domainErrors = map[string]error{
	"store.ErrRevisionGone":         store.ErrRevisionGone,
	"store.ErrRevisionInFuture":     store.ErrRevisionInFuture,
	"store.ErrInvalidCursor":        store.ErrInvalidCursor,
	"store.ErrTooManyToDelete":      store.ErrTooManyToDelete,
	"store.ErrUnavailable":          store.ErrUnavailable,
	"store.ErrCounterExists":        store.ErrCounterExists,
	"store.ErrCounterUnknown":       store.ErrCounterUnknown,
	"store.ErrCommitUnknown":        store.ErrCommitUnknown,
	"store.ErrWatchLagging":         store.ErrWatchLagging,
	"store.AlreadyExistsError":      &store.AlreadyExistsError{},
	"store.PreconditionFailedError": &store.PreconditionFailedError{},
	"store.DuplicateUpdateError":    &store.DuplicateUpdateError{},
	"store.InvalidUpdateError":      &store.InvalidUpdateError{},
	"engine.ErrMaxDepth":            engine.ErrMaxDepth,
	"engine.ErrWildcardSubject":     engine.ErrWildcardSubject,
	"engine.ErrBadSubproblem":       engine.ErrBadSubproblem,
	"engine.ErrTooComplex":          engine.ErrTooComplex,
	"engine.MissingParamsError":     &engine.MissingParamsError{Missing: []string{"x"}},
	"engine.CaveatEvalError":        &engine.CaveatEvalError{Caveat: "c", Err: errors.New("boom")},
	"schema.DiagnosticsError":       &schema.DiagnosticsError{Diagnostics: []schema.Diagnostic{{Msg: "bad"}}},
	"ir.UnknownDefinitionError":     &ir.UnknownDefinitionError{},
	"ir.UnknownRelationError":       &ir.UnknownRelationError{},
	"ir.CannotWritePermissionError": &ir.CannotWritePermissionError{},
	"ir.UnknownCaveatError":         &ir.UnknownCaveatError{},
	"ir.SubjectNotAllowedError":     &ir.SubjectNotAllowedError{},
	"ir.WildcardNotAllowedError":    &ir.WildcardNotAllowedError{},
	"ir.CaveatRequiredError":        &ir.CaveatRequiredError{},
	"ir.CaveatContextError":         &ir.CaveatContextError{Caveat: "c", Err: errors.New("boom")},
	"caveat.ErrCostExceeded":        caveat.ErrCostExceeded,
	"caveat.ParamTypeError":         &caveat.ParamTypeError{Caveat: "c", Param: "p", Err: errors.New("boom")},
	"zedtoken.ErrMalformed":         zedtoken.ErrMalformed,
	"zedtoken.ForeignError":         &zedtoken.ForeignError{Revision: "1"},
	"relcounter.ExistsError":        &relcounter.ExistsError{},
	"relcounter.UnknownError":       &relcounter.UnknownError{},
	"schemachange.Error":            &schemachange.Error{},
}

// domainDirs are the packages whose errors reach clients. The store's backends are
// left out on purpose: their errors (not migrated, directory in use, unknown format)
// come from opening a store at startup, never from a request.
var domainDirs = []string{
	"store", "engine", "engine/cache", "schema", "schema/ast", "schema/check", "schema/ir",
	"schema/perm", "schema/zed", "caveat", "rel", "server/zedtoken", "relcounter", "schemachange",
}

func TestEveryDomainErrorHasARow(t *testing.T) {
	var found []string
	for _, dir := range domainDirs {
		for _, name := range exportedErrors(t, filepath.Join("..", "..", dir)) {
			found = append(found, filepath.Base(dir)+"."+name)
		}
	}
	for _, name := range found {
		err, ok := domainErrors[name]
		if !ok {
			t.Errorf("%s is not in domainErrors: add it, and a row for it in the table", name)
			continue
		}
		if _, ok := Classify(err, nil); !ok {
			t.Errorf("%s (%v) has no row in the table", name, err)
		}
	}
	for name := range domainErrors {
		if !slices.Contains(found, name) {
			t.Errorf("domainErrors names %s, which the source does not export", name)
		}
	}
}

// exportedErrors lists the exported error variables (Err...) and the exported types
// with an Error() string method declared in dir's non-test files.
func exportedErrors(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var names []string
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, e.Name()), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			names = append(names, declErrors(decl)...)
		}
	}
	return names
}

func declErrors(decl ast.Decl) []string {
	switch d := decl.(type) {
	case *ast.GenDecl:
		if d.Tok != token.VAR {
			return nil
		}
		var names []string
		for _, spec := range d.Specs {
			for _, n := range spec.(*ast.ValueSpec).Names {
				if n.IsExported() && strings.HasPrefix(n.Name, "Err") {
					names = append(names, n.Name)
				}
			}
		}
		return names
	case *ast.FuncDecl:
		if d.Recv == nil || d.Name.Name != "Error" || len(d.Type.Params.List) != 0 {
			return nil
		}
		typ := d.Recv.List[0].Type
		if star, ok := typ.(*ast.StarExpr); ok {
			typ = star.X
		}
		if id, ok := typ.(*ast.Ident); ok && id.IsExported() {
			return []string{id.Name}
		}
	}
	return nil
}

func TestClassify(t *testing.T) {
	r := rel.Relationship{Resource: rel.ObjectRef{Type: "doc", ID: "d"}, Relation: "viewer", Subject: rel.SubjectRef{Object: rel.ObjectRef{Type: "user", ID: "u"}}}
	for _, tc := range []struct {
		err      error
		code     codes.Code
		reason   v1.ErrorReason
		meta     []string
		permify  string
		permCode codes.Code
	}{
		{fmt.Errorf("query: %w", store.ErrUnavailable), codes.Unavailable, v1.ErrorReason_ERROR_REASON_UNSPECIFIED, nil, "", 0},
		{store.OutcomeUnknown(true, errors.New("conn closed")), codes.Unavailable, v1.ErrorReason_ERROR_REASON_UNSPECIFIED, nil, "", 0},
		{store.OutcomeUnknown(false, fmt.Errorf("commit: %w", store.ErrUnavailable)), codes.Unknown, v1.ErrorReason_ERROR_REASON_UNSPECIFIED, nil, "", 0},
		{engine.ErrMaxDepth, codes.FailedPrecondition, v1.ErrorReason_ERROR_REASON_MAXIMUM_DEPTH_EXCEEDED, nil, "ERROR_CODE_DEPTH_NOT_ENOUGH", codes.InvalidArgument},
		{engine.ErrWildcardSubject, codes.InvalidArgument, v1.ErrorReason_ERROR_REASON_WILDCARD_NOT_ALLOWED, []string{"field"}, "", 0},
		{&ir.UnknownDefinitionError{Name: "x"}, codes.FailedPrecondition, v1.ErrorReason_ERROR_REASON_UNKNOWN_DEFINITION, []string{"definition_name"}, "ERROR_CODE_SCHEMA_NOT_FOUND", codes.NotFound},
		{&ir.UnknownCaveatError{Name: "c", Definition: "doc", Relation: "viewer", SubjectType: "user with c"}, codes.InvalidArgument, v1.ErrorReason_ERROR_REASON_INVALID_SUBJECT_TYPE, []string{"definition_name", "relation_name", "subject_type"}, "", 0},
		// The parameter's own error comes first, wrapped as it is at check time.
		{&engine.CaveatEvalError{Caveat: "c", Err: &caveat.ParamTypeError{Caveat: "c", Param: "p", Err: errors.New("x")}}, codes.InvalidArgument, v1.ErrorReason_ERROR_REASON_CAVEAT_PARAMETER_TYPE_ERROR, []string{"caveat_name", "parameter_name"}, "", 0},
		{
			&store.AlreadyExistsError{Relationship: r}, codes.AlreadyExists, v1.ErrorReason_ERROR_REASON_ATTEMPT_TO_RECREATE_RELATIONSHIP,
			[]string{"relationship", "resource_type", "resource_object_id", "resource_relation", "subject_type", "subject_object_id", "subject_relation"},
			"", 0,
		},
		{store.ErrRevisionGone, codes.OutOfRange, v1.ErrorReason_ERROR_REASON_UNSPECIFIED, nil, "ERROR_CODE_SNAP_TOKEN_EXPIRED", codes.FailedPrecondition},
		{context.Canceled, codes.Canceled, v1.ErrorReason_ERROR_REASON_UNSPECIFIED, nil, "", 0},
	} {
		t.Run(fmt.Sprintf("%T", tc.err), func(t *testing.T) {
			c, ok := Classify(tc.err, nil)
			if !ok || c.Code != tc.code || c.Reason != tc.reason || c.Permify.Name != tc.permify || c.Permify.Code != tc.permCode {
				t.Fatalf("Classify(%v) = %+v, %v; want %s %s, Permify %q %s", tc.err, c, ok, tc.code, tc.reason, tc.permify, tc.permCode)
			}
			var keys []string
			for k := range c.Meta {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			want := slices.Sorted(slices.Values(tc.meta))
			if !slices.Equal(keys, want) {
				t.Errorf("metadata keys %v, want %v", keys, want)
			}
		})
	}
	if _, ok := Classify(errors.New("dial tcp: refused"), nil); ok {
		t.Error("an unknown error was classified; it must be left to the adapter as INTERNAL")
	}
}

func TestSchemaErrors(t *testing.T) {
	for _, tc := range []struct {
		src    string
		code   codes.Code
		reason v1.ErrorReason
		meta   map[string]string
	}{
		{"definition doc {\n  relation viewer: usr\n}", codes.FailedPrecondition, v1.ErrorReason_ERROR_REASON_SCHEMA_TYPE_ERROR, map[string]string{"definition_name": "usr"}},
		{
			"definition user {}\ndefinition doc {\n  relation viewer: user\n  relation viewer: user\n}", codes.FailedPrecondition, v1.ErrorReason_ERROR_REASON_SCHEMA_TYPE_ERROR,
			map[string]string{"definition_name": "doc", "relation_or_permission_name": "viewer"},
		},
		// A syntax error outranks a type error, as SpiceDB's parser runs first.
		{
			"definition doc {\n  relation viewer: usr\n  relation\n}", codes.InvalidArgument, v1.ErrorReason_ERROR_REASON_SCHEMA_PARSE_ERROR,
			map[string]string{"start_line_number": "3", "start_column_position": "0", "end_line_number": "3", "end_column_position": "0", "source_code": "}"},
		},
		{
			"definition user {}\ndefinition user {}", codes.InvalidArgument, v1.ErrorReason_ERROR_REASON_SCHEMA_PARSE_ERROR,
			map[string]string{"start_line_number": "1", "start_column_position": "11", "end_line_number": "1", "end_column_position": "14", "source_code": "user"},
		},
	} {
		_, err := schema.Compile(tc.src)
		c, ok := Classify(err, nil)
		if !ok || c.Code != tc.code || c.Reason != tc.reason {
			t.Errorf("%q: classified %s %s, want %s %s", tc.src, c.Code, c.Reason, tc.code, tc.reason)
			continue
		}
		if fmt.Sprint(c.Meta) != fmt.Sprint(tc.meta) {
			t.Errorf("%q: metadata %v, want %v", tc.src, c.Meta, tc.meta)
		}
	}
}

func TestBound(t *testing.T) {
	huge := strings.Repeat("é", 1<<19) // 1 MB of two-byte runes
	c, ok := Classify(&ir.UnknownDefinitionError{Name: huge}, nil)
	if !ok {
		t.Fatal("not classified")
	}
	if len(c.Message) > maxMessage+64 || !utf8.ValidString(c.Message) || !strings.Contains(c.Message, "more bytes)") {
		t.Errorf("message of %d bytes (valid UTF-8: %v), want at most ~%d saying what was cut", len(c.Message), utf8.ValidString(c.Message), maxMessage)
	}
	if v := c.Meta["definition_name"]; len(v) > maxMetaValue+64 || !utf8.ValidString(v) {
		t.Errorf("metadata value of %d bytes, want at most ~%d", len(v), maxMetaValue)
	}
	if Bound("short") != "short" {
		t.Error("Bound changed a short message")
	}
}

func TestPreconditionMetadata(t *testing.T) {
	m := preconditionMeta(store.Precondition{Op: store.MustNotMatch, Filter: store.Filter{
		ResourceType: "document", ResourceIDs: []string{"d"}, Relation: "viewer",
		Subject: &store.SubjectFilter{Type: "user", IDs: []string{"u"}, RelationSet: true, Relation: "member"},
	}})
	want := map[string]string{
		"precondition_operation": "OPERATION_MUST_NOT_MATCH", "precondition_resource_type": "document", "precondition_resource_id": "d",
		"precondition_relation": "viewer", "precondition_subject_type": "user", "precondition_subject_id": "u", "precondition_subject_relation": "member",
	}
	if fmt.Sprint(m) != fmt.Sprint(want) {
		t.Errorf("metadata %v, want %v", m, want)
	}
}
