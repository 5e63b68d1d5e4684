package relcounter

import (
	"context"
	"errors"
	"testing"

	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/store"
	"github.com/latch-authz/latch/internal/store/memory"
)

func TestNamedErrors(t *testing.T) {
	ctx := context.Background()
	st := memory.New(memory.Options{GCInterval: -1})
	defer st.Close()
	var unknown *UnknownError
	if _, err := Filter(ctx, st, "docs"); !errors.As(err, &unknown) || unknown.Name != "docs" {
		t.Fatalf("Filter of an unregistered name: %v; want *UnknownError naming it", err)
	}
	if err := Register(ctx, st, "docs", store.Filter{ResourceType: "document"}); err != nil {
		t.Fatal(err)
	}
	var exists *ExistsError
	if err := Register(ctx, st, "docs", store.Filter{}); !errors.As(err, &exists) || exists.Name != "docs" {
		t.Fatalf("registering a name twice: %v; want *ExistsError naming it", err)
	}
	if f, err := Filter(ctx, st, "docs"); err != nil || f.ResourceType != "document" {
		t.Fatalf("Filter = %+v, %v; want the registered filter", f, err)
	}
	if err := Unregister(ctx, st, "docs"); err != nil {
		t.Fatal(err)
	}
	if err := Unregister(ctx, st, "docs"); !errors.As(err, new(*UnknownError)) {
		t.Fatalf("unregistering twice: %v; want *UnknownError", err)
	}
}

func TestCount(t *testing.T) {
	ctx := context.Background()
	st := memory.New(memory.Options{GCInterval: -1})
	defer st.Close()
	var updates []store.Update
	for _, s := range []string{"document:a#viewer@user:1", "document:b#viewer@user:2", "folder:f#viewer@user:1"} {
		r, err := rel.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		updates = append(updates, store.Update{Op: store.Touch, Relationship: r})
	}
	rev, err := st.Write(ctx, nil, updates, nil)
	if err != nil {
		t.Fatal(err)
	}
	r, err := st.Reader(ctx, rev)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := Count(ctx, r, store.Filter{ResourceType: "document"}); err != nil || n != 2 {
		t.Errorf("Count(documents) = %d, %v; want 2", n, err)
	}
}
