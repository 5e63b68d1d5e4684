package engine_test

import (
	"context"
	"errors"
	"testing"

	"github.com/latch-authz/latch/internal/engine"
	"github.com/latch-authz/latch/internal/engine/cache"
	"github.com/latch-authz/latch/internal/rel"
)

// TestCaveatErrorsDoNotDependOnOrder: which of two failing caveats a check reports, and
// whether a failure or an answer comes out, is the same whichever way round the
// operands are written, with or without the cache, asked alone or in a bulk check.
func TestCaveatErrorsDoNotDependOnOrder(t *testing.T) {
	s, reader := lookupFixture(t, `
caveat alpha(a int) { a > 1 }
caveat beta(b int) { b > 1 }
definition user {}
definition doc {
	relation lhs: user with alpha | user
	relation rhs: user with beta | user
	permission or_xy = lhs + rhs
	permission or_yx = rhs + lhs
	permission and_xy = lhs & rhs
	permission and_yx = rhs & lhs
	permission but_xy = lhs - rhs
	permission but_yx = rhs - lhs
}`,
		"doc:both#lhs@user:anne[alpha]", "doc:both#rhs@user:anne[beta]",
		"doc:plain#lhs@user:anne[alpha]", "doc:plain#rhs@user:anne",
	)
	bad := map[string]any{"a": "one", "b": "two"}
	cases := []struct {
		id, perm string
		caveat   string // "" an answer, else the caveat the check fails on
		want     engine.Membership
	}{
		// Both fail: the lesser caveat name, alpha, whichever operand comes first.
		{"both", "or_xy", "alpha", 0},
		{"both", "or_yx", "alpha", 0},
		{"both", "and_xy", "alpha", 0},
		{"both", "and_yx", "alpha", 0},
		{"both", "but_xy", "alpha", 0},
		{"both", "but_yx", "alpha", 0},
		// rhs holds without a caveat: it decides a union and a subtraction of it.
		{"plain", "or_xy", "", engine.HasPermission},
		{"plain", "or_yx", "", engine.HasPermission},
		{"plain", "but_xy", "", engine.NoPermission},
		{"plain", "and_xy", "alpha", 0},
		{"plain", "but_yx", "alpha", 0},
	}
	ctx := context.Background()
	cached := engine.New(engine.Config{MaxDepth: 12, Cache: cache.New(1 << 12)})
	for _, e := range []*engine.Engine{engine.New(engine.Config{MaxDepth: 12}), cached, cached} {
		var reqs []engine.CheckRequest
		for _, tc := range cases {
			reqs = append(reqs, engine.CheckRequest{
				Resource: rel.ObjectRef{Type: "doc", ID: tc.id}, Permission: tc.perm,
				Subject: rel.SubjectRef{Object: rel.ObjectRef{Type: "user", ID: "anne"}}, Context: bad,
			})
		}
		bulk := e.CheckBulk(ctx, s, reader, reqs)
		for i, tc := range cases {
			got, err := e.Check(ctx, s, reader, reqs[i])
			for _, r := range []engine.BulkResult{{Result: got, Err: err}, bulk[i]} {
				var ce *engine.CaveatEvalError
				switch {
				case tc.caveat == "" && (r.Err != nil || r.Result.Membership != tc.want):
					t.Errorf("doc:%s#%s: %v %v, want %v", tc.id, tc.perm, r.Result.Membership, r.Err, tc.want)
				case tc.caveat != "" && (!errors.As(r.Err, &ce) || ce.Caveat != tc.caveat):
					t.Errorf("doc:%s#%s: %v %v, want a failure on caveat %s", tc.id, tc.perm, r.Result.Membership, r.Err, tc.caveat)
				}
			}
		}
	}
}
