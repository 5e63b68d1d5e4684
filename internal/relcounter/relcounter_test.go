package relcounter

import (
	"context"
	"errors"
	"testing"

	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/store"
	"github.com/latch-authz/latch/internal/store/memory"
)

func TestRegistry(t *testing.T) {
	var c Registry
	docs := store.Filter{ResourceType: "document"}
	if _, err := c.Filter("docs"); !errors.As(err, new(*UnknownError)) {
		t.Fatalf("Filter of an unregistered name: %v; want *UnknownError", err)
	}
	if err := c.Register("docs", docs); err != nil {
		t.Fatal(err)
	}
	if err := c.Register("docs", store.Filter{}); !errors.As(err, new(*ExistsError)) {
		t.Fatalf("registering a name twice: %v; want *ExistsError", err)
	}
	if f, err := c.Filter("docs"); err != nil || f.ResourceType != "document" {
		t.Fatalf("Filter = %+v, %v; want the registered filter", f, err)
	}
	if err := c.Unregister("docs"); err != nil {
		t.Fatal(err)
	}
	if err := c.Unregister("docs"); !errors.As(err, new(*UnknownError)) {
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
