package server

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"buf.build/go/protovalidate"
	v1 "github.com/authzed/authzed-go/proto/authzed/api/v1"
	"google.golang.org/protobuf/proto"
)

// TestKnownValidAgreesWithProtovalidate: on random check requests and import messages
// built from the characters and lengths at the edges of the rules, the hand-written
// rules accept exactly what protovalidate accepts (an import with a caveat is left to
// protovalidate, and accepted by it).
func TestKnownValidAgreesWithProtovalidate(t *testing.T) {
	rnd := rand.New(rand.NewPCG(1, 2))
	const alphabet = "ab_z09AZ/*|-=+.# é"
	str := func() string {
		lengths := []int{0, 1, 2, 3, 4, 62, 63, 64, 65, 127, 128, 129, 1023, 1024, 1025}
		n := lengths[rnd.IntN(len(lengths))]
		var b strings.Builder
		for range n {
			// mostly plausible name characters, so that valid values are common
			if rnd.IntN(10) < 8 {
				b.WriteByte("abcxyz019_"[rnd.IntN(10)])
			} else {
				b.WriteString(string([]rune(alphabet)[rnd.IntN(len([]rune(alphabet)))]))
			}
		}
		return b.String()
	}
	name := func() string {
		switch rnd.IntN(6) {
		case 0:
			return str()
		case 1:
			return "org/" + str()
		case 2:
			return ""
		}
		return "document"
	}
	object := func() *v1.ObjectReference {
		if rnd.IntN(20) == 0 {
			return nil
		}
		id := str()
		switch rnd.IntN(5) {
		case 0:
			id = "*"
		case 1, 2:
			id = "readme"
		}
		return &v1.ObjectReference{ObjectType: name(), ObjectId: id}
	}
	consistency := func() *v1.Consistency {
		switch rnd.IntN(7) {
		case 0:
			return nil
		case 1:
			return &v1.Consistency{}
		case 2:
			return &v1.Consistency{Requirement: &v1.Consistency_MinimizeLatency{MinimizeLatency: rnd.IntN(2) == 0}}
		case 3:
			return &v1.Consistency{Requirement: &v1.Consistency_FullyConsistent{FullyConsistent: rnd.IntN(2) == 0}}
		case 4:
			return &v1.Consistency{Requirement: &v1.Consistency_AtLeastAsFresh{AtLeastAsFresh: &v1.ZedToken{Token: "tok"[:rnd.IntN(4)]}}}
		case 5:
			return &v1.Consistency{Requirement: &v1.Consistency_AtExactSnapshot{}}
		}
		return &v1.Consistency{Requirement: &v1.Consistency_AtExactSnapshot{AtExactSnapshot: &v1.ZedToken{Token: "t"}}}
	}
	relation := func() string {
		if rnd.IntN(2) == 0 {
			return "view"
		}
		return str()
	}
	subject := func() *v1.SubjectReference {
		if rnd.IntN(20) == 0 {
			return nil
		}
		r := ""
		if rnd.IntN(3) == 0 {
			r = relation()
		}
		return &v1.SubjectReference{Object: object(), OptionalRelation: r}
	}
	accepted := 0
	for i := range 20000 {
		var m proto.Message
		switch i % 4 {
		case 1:
			var rels []*v1.Relationship
			for range rnd.IntN(3) {
				var x *v1.Relationship
				if rnd.IntN(20) != 0 {
					x = &v1.Relationship{Resource: object(), Relation: relation(), Subject: subject()}
					if rnd.IntN(10) == 0 {
						x.OptionalCaveat = &v1.ContextualizedCaveat{CaveatName: "c"}
					}
				}
				rels = append(rels, x)
			}
			m = &v1.ImportBulkRelationshipsRequest{Relationships: rels}
			want := protovalidate.Validate(m) == nil
			caveated := slices.ContainsFunc(rels, func(x *v1.Relationship) bool { return x != nil && x.OptionalCaveat != nil })
			if got := knownValid(m); got != want && !(caveated && want) {
				t.Fatalf("%v: hand-written rules say valid=%v, protovalidate %v", m, got, want)
			}
			continue
		case 0:
			var items []*v1.CheckBulkPermissionsRequestItem
			for range rnd.IntN(3) {
				items = append(items, &v1.CheckBulkPermissionsRequestItem{Resource: object(), Permission: relation(), Subject: subject()})
			}
			m = &v1.CheckBulkPermissionsRequest{Consistency: consistency(), Items: items}
		default:
			m = &v1.CheckPermissionRequest{Consistency: consistency(), Resource: object(), Permission: relation(), Subject: subject()}
		}
		want := protovalidate.Validate(m) == nil
		if got := knownValid(m); got != want {
			t.Fatalf("%v: hand-written rules say valid=%v, protovalidate %v", m, got, want)
		}
		if want {
			accepted++
		}
	}
	if accepted < 1000 {
		t.Fatalf("only %d of 20000 random requests were valid: the generator needs fixing", accepted)
	}
	t.Logf("%d of 20000 requests valid", accepted)
}
