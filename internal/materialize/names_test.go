package materialize

import (
	"fmt"
	"testing"
)

// TestNamesFindWhatWasAdded: every name added is found with its id across the
// table's growths (each of which makes the slots' tags one bit narrower), names never
// added are not, and the table's measured size is what its arrays hold.
func TestNamesFindWhatWasAdded(t *testing.T) {
	tab := newNames()
	const n = 200_000
	for i := range n {
		name := []byte(fmt.Sprint("user:u", i))
		if _, _, ok := tab.find(name); ok {
			t.Fatalf("%s found before it was added", name)
		}
		_, hash, _ := tab.find(name)
		if id, _ := tab.add(name, hash); id != uint32(i) {
			t.Fatalf("%s added as %d, want %d", name, id, i)
		}
	}
	for i := range n {
		if id, ok := tab.lookup([]byte(fmt.Sprint("user:u", i))); !ok || id != uint32(i) {
			t.Fatalf("user:u%d: %d %v, want %d", i, id, ok, i)
		}
		if id, ok := tab.lookup([]byte(fmt.Sprint("user:v", i))); ok {
			t.Fatalf("user:v%d found as %d, never added", i, id)
		}
	}
	if tab.bytes() != tab.measure() {
		t.Fatalf("the table says it holds %d bytes; its arrays hold %d", tab.bytes(), tab.measure())
	}
}
