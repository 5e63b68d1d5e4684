package engine

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestMergeSources: objects of sources each in id order come out in id order, an id
// found by several sources once per source and together; an error of a source or of
// the consumer stops the merge with it.
func TestMergeSources(t *testing.T) {
	from := func(ids ...string) source {
		return func(fn func(string, outcome) error) error {
			for _, id := range ids {
				if err := fn(id, outHas); err != nil {
					return err
				}
			}
			return nil
		}
	}
	collect := func(srcs ...source) ([]string, error) {
		var got []string
		err := mergeSources(srcs, func(id string, _ outcome) error {
			got = append(got, id)
			return nil
		})
		return got, err
	}
	got, err := collect(from("a", "c", "e"), from(), from("b", "c", "f"), from("d"))
	if want := []string{"a", "b", "c", "c", "d", "e", "f"}; err != nil || !slices.Equal(got, want) {
		t.Fatalf("merged %v, %v; want %v", got, err, want)
	}

	broken := errors.New("read failed")
	failing := func(fn func(string, outcome) error) error {
		if err := fn("b", outHas); err != nil {
			return err
		}
		return broken
	}
	if got, err = collect(from("a", "c"), failing); !errors.Is(err, broken) || !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("with a failing source: %v, %v; want [a b] and its error", got, err)
	}
	if _, err = collect(failing); !errors.Is(err, broken) {
		t.Fatalf("one failing source: %v", err)
	}

	full := errors.New("enough")
	n := 0
	err = mergeSources([]source{from("a", "c"), from("b", "d")}, func(string, outcome) error {
		if n++; n == 2 {
			return full
		}
		return nil
	})
	if !errors.Is(err, full) || n != 2 {
		t.Fatalf("a consumer's error: %v after %d; want it after 2", err, n)
	}
}

// TestEmittedIDs: emittedIDs answers as a set of every id added would, for batches in
// order and out of it (past the runs it keeps apart) and for ids asked in order and
// out of it.
func TestEmittedIDs(t *testing.T) {
	rnd := rand.New(rand.NewPCG(3, 4))
	for trial := range 50 {
		e, want := &emittedIDs{}, map[string]bool{}
		ordered := trial%2 == 0
		for i := range rnd.IntN(30) {
			// A batch: ids in order, none added before, after the last batch's when
			// the trial is an ordered one.
			var batch []string
			for range rnd.IntN(20) {
				id := fmt.Sprintf("%04d", rnd.IntN(2000))
				if ordered {
					id = fmt.Sprintf("%04d", 60*i+rnd.IntN(60))
				}
				if !want[id] && !slices.Contains(batch, id) {
					batch = append(batch, id)
				}
			}
			slices.Sort(batch)
			asked := slices.Clone(batch)
			if rnd.IntN(2) == 0 {
				asked = append(asked, fmt.Sprintf("%04d", rnd.IntN(2000)))
			}
			if ordered {
				slices.Sort(asked)
			}
			for _, id := range asked {
				if got := e.has(id); got != want[id] {
					t.Fatalf("trial %d: has(%s) = %v, want %v", trial, id, got, want[id])
				}
			}
			e.add(batch)
			for _, id := range batch {
				want[id] = true
			}
		}
		for id := range want {
			if !e.has(id) {
				t.Fatalf("trial %d: added %s, not found", trial, id)
			}
		}
	}
}
