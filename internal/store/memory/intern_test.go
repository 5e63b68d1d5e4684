package memory

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// TestInternerRandom interns and releases random strings with a hash so weak that
// most strings collide, next to a map of expected reference counts, and checks every
// live symbol still reads back its string, through compactions and long strings. Odd
// seeds give colliding strings different hash tags, so that probes also skip slots
// on the tag alone.
func TestInternerRandom(t *testing.T) {
	for seed := range uint64(4) {
		rnd := rand.New(rand.NewPCG(seed, 5))
		in := newInterner()
		in.weakHash = func(s string) uint64 { return uint64(len(s) % 3) }
		if seed%2 == 1 {
			in.weakHash = func(s string) uint64 { return uint64(len(s)%3) | uint64(s[len(s)-1])<<56 }
		}
		in.minDead = 4 << 10
		refs := map[string]int{}
		ids := map[string]sym{}
		var released []sym
		for step := range 4000 {
			s := fmt.Sprint("s", rnd.IntN(200))
			if rnd.IntN(20) == 0 {
				s = strings.Repeat("long", 5000) + s // past arenaChunk/4: a chunk of its own
			}
			if rnd.IntN(2) == 0 || refs[s] == 0 {
				id := in.intern(s)
				if old, ok := ids[s]; ok && refs[s] > 0 && old != id {
					t.Fatalf("seed %d step %d: %q interned as %d, was %d", seed, step, s, id, old)
				}
				ids[s] = id
				refs[s]++
			} else {
				refs[s]--
				if in.release(ids[s]) != (refs[s] == 0) {
					t.Fatalf("seed %d step %d: release of %q disagrees on reaching zero", seed, step, s)
				}
				if refs[s] == 0 {
					released = append(released, ids[s])
				}
			}
			if rnd.IntN(50) == 0 {
				in.reclaim(released)
				released = released[:0]
			}
			if step%25 != 0 {
				continue
			}
			if in.used != in.count()-1 { // every symbol but the empty string, none twice
				t.Fatalf("seed %d step %d: lookup table holds %d symbols, %d are in use", seed, step, in.used, in.count()-1)
			}
			for s, n := range refs {
				if n == 0 {
					continue
				}
				if got := in.str(ids[s]); got != s {
					t.Fatalf("seed %d step %d: symbol %d reads %.20q, want %.20q", seed, step, ids[s], got, s)
				}
				if id, ok := in.lookup(s); !ok || id != ids[s] {
					t.Fatalf("seed %d step %d: lookup(%.20q) = %d, %v; want %d", seed, step, s, id, ok, ids[s])
				}
			}
		}
	}
}

func TestInternerCompactKeepsHandedOutStrings(t *testing.T) {
	in := newInterner()
	in.minDead = 1 << 10
	var keep []string
	var drop []sym
	for i := range 2000 {
		id := in.intern(fmt.Sprintf("string-%05d", i))
		if i%100 == 0 {
			keep = append(keep, in.str(id))
		} else {
			in.release(id)
			drop = append(drop, id)
		}
	}
	chunks := len(in.chunks)
	in.reclaim(drop)
	if in.dead != 0 || len(in.chunks) >= chunks && chunks > 1 {
		t.Fatalf("no compaction: dead %d, chunks %d -> %d", in.dead, chunks, len(in.chunks))
	}
	for i, s := range keep {
		if want := fmt.Sprintf("string-%05d", i*100); s != want {
			t.Fatalf("handed-out string changed to %q, want %q", s, want)
		}
		if _, ok := in.lookup(s); !ok {
			t.Fatalf("%q lost by compaction", s)
		}
	}
	if in.count() != len(keep)+1 {
		t.Fatalf("%d symbols in use, want %d", in.count(), len(keep)+1)
	}
}

// TestIDListRandom inserts and removes random ids and compares the list and its seeks
// with a sorted slice.
func TestIDListRandom(t *testing.T) {
	rnd := rand.New(rand.NewPCG(1, 2))
	in := newInterner()
	var l idList
	present := map[string]bool{}
	for step := range 20000 {
		s := fmt.Sprint(rnd.IntN(3000))
		if rnd.IntN(3) == 0 {
			l.remove(in, in.intern(s))
			delete(present, s)
		} else {
			l.insert(in, in.intern(s))
			present[s] = true
		}
		if step%500 != 0 {
			continue
		}
		var want []string
		for s := range present {
			want = append(want, s)
		}
		slices.Sort(want)
		var got []string
		for c, i := 0, 0; ; {
			id, ok := l.at(c, i)
			if !ok {
				break
			}
			got = append(got, in.str(id))
			c, i = l.step(c, i)
		}
		if !slices.Equal(got, want) || l.len() != len(want) {
			t.Fatalf("step %d: list holds %d ids (len %d), want %d", step, len(got), l.len(), len(want))
		}
		key := fmt.Sprint(rnd.IntN(3000))
		c, i := l.seek(in, key)
		pos, _ := slices.BinarySearch(want, key)
		id, ok := l.at(c, i)
		if ok != (pos < len(want)) || ok && in.str(id) != want[pos] {
			t.Fatalf("step %d: seek(%q) found %q, want position %d", step, key, in.str(id), pos)
		}
	}
}
