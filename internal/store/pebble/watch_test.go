package pebble

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/store"
)

// The history a watch rebuilds from the versioned keys (after a restart, the feed is
// empty) is exactly what the live feed delivered: random touches, deletes, caveats,
// expirations, filtered deletes, schema writes and a bulk load.
func TestWatchHistoryMatchesFeed(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	dir := t.TempDir()
	s := openDir(t, dir, Options{GCInterval: -1})
	start, _ := s.HeadRevision(ctx)
	rnd := rand.New(rand.NewPCG(1, 2))
	for range 60 {
		randomWatchWrite(t, s, rnd)
	}
	if _, err := s.BulkLoad(ctx, generated(50)); err != nil {
		t.Fatal(err)
	}
	for range 20 {
		randomWatchWrite(t, s, rnd)
	}
	head, _ := s.HeadRevision(ctx)
	live := watchUntil(ctx, t, s, start, head)
	if len(live) < 40 {
		t.Fatalf("only %d revisions changed something; the test writes too little", len(live))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2 := openDir(t, dir, Options{GCInterval: -1})
	rebuilt := watchUntil(ctx, t, s2, start, head)
	if l, r := strings.Join(live, "\n"), strings.Join(rebuilt, "\n"); l != r {
		t.Fatalf("rebuilt history differs from the live feed:\nlive:\n%s\nrebuilt:\n%s", l, r)
	}
}

// A watch from a revision the collector forgot fails with ErrRevisionGone.
func TestWatchFromCollectedRevision(t *testing.T) {
	ctx := context.Background()
	c := newClock()
	s := openDir(t, t.TempDir(), Options{GCWindow: time.Hour, GCInterval: -1, Now: c.Now})
	doc := func(id string) rel.Relationship { return relationship("document", id, "viewer", "user", "u", "") }
	old := mustWrite(t, s, store.Create, doc("a"))
	mustWrite(t, s, store.Create, doc("b"))
	c.advance(2 * time.Hour)
	if _, err := s.GC(ctx); err != nil {
		t.Fatal(err)
	}
	for _, err := range s.Watch(ctx, old, store.WatchOptions{}) {
		if !errors.Is(err, store.ErrRevisionGone) {
			t.Fatalf("watch from a collected revision: %v, want ErrRevisionGone", err)
		}
		break
	}
}

// randomWatchWrite makes one random write over a small universe, so that touches
// replace, deletes hit and miss, and filtered deletes and schema writes happen.
func randomWatchWrite(t *testing.T, s *Store, rnd *rand.Rand) {
	ctx := context.Background()
	pick := func() rel.Relationship {
		r := relationship("doc", fmt.Sprint(rnd.IntN(6)), "viewer", "user", fmt.Sprint(rnd.IntN(3)), "")
		switch rnd.IntN(4) {
		case 0:
			r.Caveat = &rel.Caveat{Name: "c", Context: map[string]any{"n": float64(rnd.IntN(2))}}
		case 1:
			exp := time.Date(2100, 1, 1, 0, 0, rnd.IntN(2), 0, time.UTC)
			r.Expiration = &exp
		}
		return r
	}
	var err error
	switch rnd.IntN(10) {
	case 0:
		_, err = s.WriteSchema(ctx, fmt.Sprint("schema ", rnd.IntN(100)), nil)
	case 1:
		_, _, _, err = s.DeleteByFilter(ctx, nil, store.Filter{ResourceType: "doc", ResourceIDs: []string{fmt.Sprint(rnd.IntN(6))}}, 0, false)
	default:
		seen := map[rel.Key]bool{}
		var us []store.Update
		for range 1 + rnd.IntN(4) {
			r := pick()
			if seen[r.Key()] {
				continue
			}
			seen[r.Key()] = true
			op := store.Touch
			if rnd.IntN(3) == 0 {
				op = store.Delete
			}
			us = append(us, store.Update{Op: op, Relationship: r})
		}
		_, err = s.Write(ctx, nil, us, nil)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// watchUntil watches from after until a checkpoint at head, returning each change
// as text.
func watchUntil(ctx context.Context, t *testing.T, s *Store, after, head store.Revision) []string {
	t.Helper()
	var out []string
	for c, err := range s.Watch(ctx, after, store.WatchOptions{CheckpointInterval: time.Millisecond}) {
		if err != nil {
			t.Fatal(err)
		}
		if c.Checkpoint {
			if c.Revision == head {
				return out
			}
			continue
		}
		var parts []string
		for _, u := range c.Updates {
			parts = append(parts, u.Op.String()+" "+rel.String(u.Relationship))
		}
		out = append(out, fmt.Sprintf("@%d schema=%v %s", c.Revision, c.SchemaChanged, strings.Join(parts, ", ")))
	}
	t.Fatal("watch ended early")
	return nil
}
