package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/store"
)

func TestPrefixUpperBound(t *testing.T) {
	cases := []struct {
		p, want string
		ok      bool
	}{
		{"a", "b", true},
		{"ab", "ac", true},
		{"a\u00ff", "a\u0100", true},
		{"a\U0010FFFF", "b", true},
		{"\U0010FFFF", "", false},
		{"", "", false},
		{"x\uD7FF", "x\uE000", true},
	}
	for _, c := range cases {
		got, ok := PrefixUpperBound(c.p)
		if got != c.want || ok != c.ok {
			t.Errorf("PrefixUpperBound(%q) = %q, %v; want %q, %v", c.p, got, ok, c.want, c.ok)
		}
	}
	// Every string with the prefix sorts below the bound, bytewise.
	for _, p := range []string{"doc_", "é", "a\U0010FFFF"} {
		upper, _ := PrefixUpperBound(p)
		for _, s := range []string{p, p + "\x00", p + "zzz", p + "\U0010FFFF\U0010FFFF"} {
			if !(s >= p && s < upper) {
				t.Errorf("%q is outside [%q, %q)", s, p, upper)
			}
		}
	}
}

func TestFilterConditions(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	var a Args
	f := store.Filter{
		ResourceType: "doc", ResourceIDs: []string{"a", "b"}, ResourceIDPrefix: "x%_",
		Relation: "viewer", Subject: &store.SubjectFilter{Type: "user", IDs: []string{"u"}, RelationSet: true},
	}
	got := And(FilterConditions(f, now, &a))
	want := "resource_type = $1 AND resource_id = ANY($2) AND resource_id >= $3 AND resource_id < $4 AND relation = $5" +
		" AND subject_type = $6 AND subject_id = $7 AND subject_relation = $8 AND (expiration IS NULL OR expiration > $9)"
	if got != want {
		t.Fatalf("conditions:\n got  %s\n want %s", got, want)
	}
	wantArgs := []any{"doc", []string{"a", "b"}, "x%_", "x%`", "viewer", "user", "u", "", now}
	if fmt.Sprint(a.Values) != fmt.Sprint(wantArgs) {
		t.Fatalf("args %v, want %v", a.Values, wantArgs)
	}
	a = Args{}
	if got := And(FilterConditions(store.Filter{IncludeExpired: true}, now, &a)); got != "TRUE" || len(a.Values) != 0 {
		t.Fatalf("empty filter: %q %v", got, a.Values)
	}
	a = Args{}
	got = And(FilterConditions(store.Filter{ResourceIDPrefix: "\U0010FFFF", IncludeExpired: true}, now, &a))
	if got != "resource_id >= $1 AND resource_id LIKE $2" || a.Values[1] != "\U0010FFFF%" {
		t.Fatalf("prefix without an upper bound: %q %q", got, a.Values)
	}
}

func TestSelectBuild(t *testing.T) {
	var a Args
	a.Add("visibility-param")
	sel := Select{
		Table: "rels", AsOf: "AS OF SYSTEM TIME $1", Extra: []string{"v = $1"},
		Filter: store.Filter{ResourceType: "doc", IncludeExpired: true}, Limit: 10,
	}
	after := rel.Key{ResourceType: "doc", ResourceID: "a"}
	got := sel.Build(&a, &after)
	want := "SELECT " + SelectColumns + " FROM rels AS OF SYSTEM TIME $1 WHERE resource_type = $2 AND v = $1 AND " +
		"(resource_type, resource_id, relation, subject_type, subject_id, subject_relation) > ($3, $4, $5, $6, $7, $8) " +
		OrderBy + " LIMIT $9"
	if got != want {
		t.Fatalf("select:\n got  %s\n want %s", got, want)
	}
	if len(a.Values) != 9 || a.Values[8] != int64(10) {
		t.Fatalf("args %v", a.Values)
	}
}

func TestSplitUpdates(t *testing.T) {
	r := rel.Relationship{
		Resource: rel.ObjectRef{Type: "doc", ID: "a"}, Relation: "viewer",
		Subject: rel.SubjectRef{Object: rel.ObjectRef{Type: "user", ID: "u"}},
	}
	var invalid *store.InvalidUpdateError
	b, err := SplitUpdates([]store.Update{{Op: store.Create, Relationship: r}})
	if err != nil || b.EndsExpired.Len() != 1 || b.Ends.Len() != 0 || b.Inserts.Len() != 1 {
		t.Fatalf("split of one create: %+v, %v", b, err)
	}
	bad := r
	bad.Caveat = &rel.Caveat{Name: "c", Context: map[string]any{"ch": make(chan int)}}
	if _, err := SplitUpdates([]store.Update{{Op: store.Touch, Relationship: bad}}); !errors.As(err, &invalid) {
		t.Fatalf("unencodable context: %v", err)
	}
}

func TestEncodeCaveat(t *testing.T) {
	name, ctx, err := EncodeCaveat(&rel.Caveat{Name: "c", Context: map[string]any{"n": 1.5}})
	if err != nil || *name != "c" || *ctx != `{"n":1.5}` {
		t.Fatalf("EncodeCaveat: %v %v %v", name, ctx, err)
	}
	if name, ctx, _ := EncodeCaveat(&rel.Caveat{Name: "c"}); *name != "c" || ctx != nil {
		t.Fatalf("empty context must be NULL: %v", ctx)
	}
	if name, ctx, _ := EncodeCaveat(nil); name != nil || ctx != nil {
		t.Fatal("no caveat must be NULL, NULL")
	}
}

func TestPages(t *testing.T) {
	var all []rel.Relationship
	for i := range 2500 {
		all = append(all, rel.Relationship{Resource: rel.ObjectRef{Type: "doc", ID: fmt.Sprintf("d%05d", i)}})
	}
	var fetches []int
	fetch := func(_ context.Context, after *rel.Key, n int) ([]rel.Relationship, error) {
		fetches = append(fetches, n)
		start := 0
		if after != nil {
			start, _ = slices.BinarySearchFunc(all, *after, func(r rel.Relationship, k rel.Key) int { return store.CompareKeys(r.Key(), k) })
			start++
		}
		return all[start:min(start+n, len(all))], nil
	}
	codec := store.NewCursorCodec(store.Filter{})
	collect := func(opts store.QueryOptions) []store.Item {
		var out []store.Item
		for item, err := range Pages(context.Background(), codec, opts, fetch) {
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, item)
		}
		return out
	}
	if got := collect(store.QueryOptions{}); len(got) != 2500 || !slices.Equal(fetches, []int{1000, 1000, 1000}) {
		t.Fatalf("unlimited read %d items in fetches %v", len(got), fetches)
	}
	fetches = nil
	got := collect(store.QueryOptions{Limit: 1200})
	if len(got) != 1200 || !slices.Equal(fetches, []int{1000, 200}) {
		t.Fatalf("limit 1200 read %d items in fetches %v", len(got), fetches)
	}
	rest := collect(store.QueryOptions{After: got[1199].Cursor()})
	if len(rest) != 1300 || rest[0].Relationship.Resource.ID != "d01200" {
		t.Fatalf("resuming read %d items starting at %v", len(rest), rest[0].Relationship.Resource)
	}
	for _, err := range Pages(context.Background(), codec, store.QueryOptions{After: "bogus"}, fetch) {
		if !errors.Is(err, store.ErrInvalidCursor) {
			t.Fatalf("bad cursor: %v", err)
		}
	}
}

func TestUnavailable(t *testing.T) {
	cases := []struct {
		err  error
		want bool
	}{
		{&pgconn.PgError{Code: "57P01"}, true},
		{&pgconn.PgError{Code: "08006"}, true},
		{&pgconn.PgError{Code: "23505"}, false},
		{&pgconn.PgError{Code: "3D000"}, false},
		{fmt.Errorf("read: %w", io.ErrUnexpectedEOF), true},
		{errors.New("conn closed"), true},
		{context.Canceled, false},
		{errors.New("syntax"), false},
	}
	for _, c := range cases {
		if got := Unavailable(c.err); got != c.want {
			t.Errorf("Unavailable(%v) = %v, want %v", c.err, got, c.want)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Classify(ctx, "q", errors.New("conn closed")); !errors.Is(err, context.Canceled) || errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("a cancelled request reports %v", err)
	}
	if err := Classify(context.Background(), "q", &pgconn.PgError{Code: "57P03"}); !errors.Is(err, store.ErrUnavailable) || !strings.HasPrefix(err.Error(), "q: ") {
		t.Fatalf("classified: %v", err)
	}
}

func TestLikePrefix(t *testing.T) {
	if got := likePrefix(`a%_\`); got != `a\%\_\\%` {
		t.Fatalf("likePrefix escapes to %q", got)
	}
}
