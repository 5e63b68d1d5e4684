package schema

import (
	"context"
	"errors"
	"testing"
)

func TestCacheCompilesOnceAndEvictsOldest(t *testing.T) {
	compiles := map[string]int{}
	c := NewCache(2, func(_ context.Context, text string) (string, error) {
		compiles[text]++
		if text == "bad" {
			return "", errors.New("does not compile")
		}
		return "compiled " + text, nil
	})
	for _, text := range []string{"a", "a", "b", "a", "c", "a", "b"} {
		if v, err := c.Get(context.Background(), text); err != nil || v != "compiled "+text {
			t.Fatalf("Get(%q) = %q, %v", text, v, err)
		}
	}
	// a and b are kept; c pushes a out (the oldest), which comes back and pushes b out.
	if want := map[string]int{"a": 2, "b": 2, "c": 1}; len(compiles) != 3 || compiles["a"] != want["a"] || compiles["b"] != want["b"] || compiles["c"] != want["c"] {
		t.Errorf("compiles = %v; want %v", compiles, want)
	}
	for range 2 {
		if _, err := c.Get(context.Background(), "bad"); err == nil {
			t.Fatal("a text that does not compile was served")
		}
	}
	if compiles["bad"] != 2 {
		t.Errorf("a failing text was compiled %d times in two gets; want it not kept", compiles["bad"])
	}
}
