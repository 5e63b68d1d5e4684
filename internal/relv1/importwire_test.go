package relv1

import (
	"bytes"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	v1 "github.com/authzed/authzed-go/proto/authzed/api/v1"
	"google.golang.org/protobuf/proto"

	"github.com/latch-authz/latch/internal/rel"
)

// TestAppendImportRequest holds the encoder to the generated code's bytes, on
// relationships with and without subject relations and with ids long enough for
// multi-byte lengths, and FromImportRequest reads them back.
func TestAppendImportRequest(t *testing.T) {
	rnd := rand.New(rand.NewPCG(1, 2))
	id := func() string { return strings.Repeat("x", rnd.IntN(3)*100) + string(rune('a'+rnd.IntN(26))) }
	for n := range 50 {
		rels := make([]rel.Relationship, n)
		wire := make([]*v1.Relationship, n)
		for i := range rels {
			rels[i] = rel.Relationship{
				Resource: rel.ObjectRef{Type: "doc", ID: id()}, Relation: "viewer",
				Subject: rel.SubjectRef{Object: rel.ObjectRef{Type: "group", ID: id()}},
			}
			if rnd.IntN(2) == 0 {
				rels[i].Subject.Relation = "member"
			}
			w, err := Relationship(rels[i])
			if err != nil {
				t.Fatal(err)
			}
			wire[i] = w
		}
		want, err := proto.MarshalOptions{Deterministic: true}.Marshal(&v1.ImportBulkRelationshipsRequest{Relationships: wire})
		if err != nil {
			t.Fatal(err)
		}
		got, ok := AppendImportRequest([]byte("prefix"), rels)
		if !ok || !bytes.Equal(got[len("prefix"):], want) || string(got[:len("prefix")]) != "prefix" {
			t.Fatalf("%d relationships: AppendImportRequest = %x, %v; the generated code writes %x", n, got, ok, want)
		}
		back, ok := FromImportRequest(got[len("prefix"):])
		if !ok || len(back) != n || (n > 0 && !reflect.DeepEqual(back, rels)) {
			t.Fatalf("%d relationships: read back as %v, %v", n, back, ok)
		}
	}
}

// TestAppendImportRequestLeavesCaveatsAndExpirations to the generated code.
func TestAppendImportRequestLeavesCaveatsAndExpirations(t *testing.T) {
	plain := rel.Relationship{Resource: rel.ObjectRef{Type: "doc", ID: "1"}, Relation: "viewer", Subject: rel.SubjectRef{Object: rel.ObjectRef{Type: "user", ID: "a"}}}
	caveated, expiring := plain, plain
	caveated.Caveat = &rel.Caveat{Name: "c"}
	at := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	expiring.Expiration = &at
	for _, r := range []rel.Relationship{caveated, expiring} {
		if got, ok := AppendImportRequest([]byte("dst"), []rel.Relationship{plain, r}); ok || string(got) != "dst" {
			t.Errorf("%s: AppendImportRequest = %q, %v; want dst unchanged and false", rel.String(r), got, ok)
		}
	}
}

func BenchmarkAppendImportRequest(b *testing.B) {
	rels := make([]rel.Relationship, 1000)
	for i := range rels {
		rels[i] = rel.Relationship{
			Resource: rel.ObjectRef{Type: "user", ID: "u" + strings.Repeat("1", i%6)}, Relation: "follower",
			Subject: rel.SubjectRef{Object: rel.ObjectRef{Type: "user", ID: "u" + strings.Repeat("2", i%5)}},
		}
	}
	b.Run("append", func(b *testing.B) {
		var buf []byte
		for b.Loop() {
			buf, _ = AppendImportRequest(buf[:0], rels)
		}
	})
	b.Run("generated", func(b *testing.B) {
		for b.Loop() {
			wire := make([]*v1.Relationship, len(rels))
			for i, r := range rels {
				wire[i], _ = Relationship(r)
			}
			if _, err := proto.Marshal(&v1.ImportBulkRelationshipsRequest{Relationships: wire}); err != nil {
				b.Fatal(err)
			}
		}
	})
}
