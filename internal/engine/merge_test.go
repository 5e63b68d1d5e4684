package engine

import (
	"errors"
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
