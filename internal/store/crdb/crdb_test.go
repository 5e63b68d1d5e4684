package crdb

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/latch-authz/latch/internal/store"
	"github.com/latch-authz/latch/internal/store/storetest"
)

func TestParseHLC(t *testing.T) {
	for _, c := range []struct {
		in   string
		want HLC
	}{
		{"1700000000123456789.0000000001", HLC{1700000000123456789, 1}},
		{"1700000000123456789.0000000000", HLC{1700000000123456789, 0}},
		{"1700000000123456789", HLC{1700000000123456789, 0}},
		{"1700000000123456789.2147483647", HLC{1700000000123456789, math.MaxInt32}},
		{"1700000000123456789.00000000012", HLC{}}, // 11 digits: refused
	} {
		got, err := ParseHLC(c.in)
		if c.want == (HLC{}) {
			if err == nil {
				t.Errorf("ParseHLC(%q) = %v, want an error", c.in, got)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("ParseHLC(%q) = %v, %v; want %v", c.in, got, err, c.want)
		}
		if back, _ := ParseHLC(got.String()); back != got {
			t.Errorf("%v does not round-trip through %q", got, got.String())
		}
	}
	for _, bad := range []string{"", "x.1", "-5.0", "1.x", "1.9999999999"} {
		if _, err := ParseHLC(bad); err == nil {
			t.Errorf("ParseHLC(%q) succeeded", bad)
		}
	}
}

func TestRevisionEncoding(t *testing.T) {
	wall := time.Date(2026, 11, 22, 12, 0, 0, 123456789, time.UTC).UnixNano()
	for l := int32(0); l < logicalMax; l++ {
		h := HLC{wall, l}
		rev, err := EncodeRevision(h)
		if err != nil || DecodeRevision(rev) != h {
			t.Fatalf("%v encodes to %d, %v and decodes to %v", h, rev, err, DecodeRevision(rev))
		}
	}
	// A saturated logical counter decodes to the largest one, so reads see the write.
	for _, l := range []int32{logicalMax, 100, math.MaxInt32} {
		rev, _ := EncodeRevision(HLC{wall, l})
		if got := DecodeRevision(rev); got.WallNanos != wall || got.Logical != math.MaxInt32 {
			t.Fatalf("logical %d decodes to %v", l, got)
		}
	}
	for _, h := range []HLC{{0, 0}, {revisionEpoch - 1, 0}, {math.MaxInt64, 0}, {wall, -1}} {
		if rev, err := EncodeRevision(h); err == nil {
			t.Errorf("%v encoded to %d; want an out-of-range error", h, rev)
		}
	}
	if rev, _ := EncodeRevision(HLC{revisionEpoch, 0}); rev != 0 {
		t.Fatalf("the epoch encodes to %d", rev)
	}
	if rev, _ := EncodeRevision(HLC{revisionEpoch + 1, 0}); rev == 0 {
		t.Fatal("a real timestamp encodes to the invalid revision 0")
	}
}

// TestRevisionOrder checks on random pairs that encoding never inverts two timestamps
// and that a decoded revision is never below the timestamp it encodes.
func TestRevisionOrder(t *testing.T) {
	rnd := rand.New(rand.NewPCG(1, 2))
	base := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
	random := func() HLC {
		return HLC{base + rnd.Int64N(1000), int32(rnd.IntN(12))}
	}
	for range 100_000 {
		a, b := random(), random()
		ra, _ := EncodeRevision(a)
		rb, _ := EncodeRevision(b)
		if a.Less(b) && ra > rb {
			t.Fatalf("%v < %v but %d > %d", a, b, ra, rb)
		}
		if a.Less(b) && ra == rb && a.Logical < logicalMax {
			t.Fatalf("%v and %v share revision %d", a, b, ra)
		}
		if DecodeRevision(ra).Less(a) {
			t.Fatalf("%v decodes to the earlier %v", a, DecodeRevision(ra))
		}
	}
}

func TestSQL(t *testing.T) {
	rev, _ := EncodeRevision(HLC{1800000000000000000, 2})
	sql, args := selectPage(store.Filter{ResourceType: "doc", ResourceIDs: []string{"a", "b"}, IncludeExpired: true}, asOf(rev), time.Now(), nil, 100)
	want := "SELECT resource_type, resource_id, relation, subject_type, subject_id, subject_relation, caveat_name, caveat_context, expiration " +
		"FROM latch_relationships AS OF SYSTEM TIME '1800000000000000000.0000000002' WHERE resource_type = $1 AND resource_id = ANY($2) " +
		"ORDER BY resource_type, resource_id, relation, subject_type, subject_id, subject_relation LIMIT $3"
	if sql != want || len(args) != 3 {
		t.Fatalf("read SQL:\n got  %s\n want %s\n args %v", sql, want, args)
	}
	if got := schemaSQL(asOf(rev)); got != "SELECT text FROM latch_schema AS OF SYSTEM TIME '1800000000000000000.0000000002' WHERE singleton" {
		t.Fatalf("schema SQL: %s", got)
	}
	if got := schemaSQL(""); got != "SELECT text FROM latch_schema WHERE singleton" {
		t.Fatalf("schema SQL in a transaction: %s", got)
	}
	if got := ChangefeedSQL(rev, time.Second); !strings.HasSuffix(got, "resolved = '1000ms', cursor = '1800000000000000000.0000000002'") {
		t.Fatalf("changefeed SQL: %s", got)
	}
	for _, stmt := range []string{liveCreatedSQL, deleteKeysSQL, upsertSQL} {
		if strings.Count(stmt, "$") < 6 || strings.Contains(stmt, "xid") {
			t.Fatalf("write SQL lost its parameters or uses PostgreSQL-only columns: %s", stmt)
		}
	}
}

func TestRevisionWindow(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	s := &Store{opts: Options{GCWindow: time.Hour, Now: func() time.Time { return now }}}
	old, _ := EncodeRevision(HLC{now.Add(-2 * time.Hour).UnixNano(), 0})
	recent, _ := EncodeRevision(HLC{now.Add(-time.Minute).UnixNano(), 0})
	s.sawHead(recent + 10)
	for rev, want := range map[store.Revision]error{0: store.ErrRevisionGone, old: store.ErrRevisionGone, recent: nil} {
		if err := s.checkRevision(context.Background(), rev); (err == nil) != (want == nil) || want != nil && !strings.Contains(err.Error(), want.Error()) {
			t.Errorf("checkRevision(%d) = %v, want %v", rev, err, want)
		}
	}
}

// TestConformance runs the store suite against a real cluster named by LATCH_CRDB_URI.
func TestConformance(t *testing.T) {
	uri := os.Getenv("LATCH_CRDB_URI")
	if uri == "" {
		t.Skip("LATCH_CRDB_URI is not set: no CockroachDB cluster to test against (see the package comment)")
	}
	var n atomic.Int64
	stamp := time.Now().UnixNano()
	storetest.Run(t, func(t *testing.T) store.Store {
		ctx := context.Background()
		name := fmt.Sprintf("latch_test_%d_%d", stamp, n.Add(1))
		admin, err := pgx.Connect(ctx, uri)
		if err != nil {
			t.Fatal(err)
		}
		defer admin.Close(ctx)
		if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
			t.Fatal(err)
		}
		cfg, err := pgx.ParseConfig(uri)
		if err != nil {
			t.Fatal(err)
		}
		dbURI := strings.Replace(uri, "/"+cfg.Database, "/"+name, 1)
		if err := Migrate(ctx, dbURI); err != nil {
			t.Fatal(err)
		}
		s, err := Open(ctx, dbURI, Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = s.Close()
			if c, err := pgx.Connect(context.Background(), uri); err == nil {
				_, _ = c.Exec(context.Background(), "DROP DATABASE "+name+" CASCADE")
				c.Close(context.Background())
			}
		})
		return s
	})
}
