// Command crashtest writes numbered batches to a pebble store until it is killed. It
// prints "ack <batch> <revision>" after each write is acknowledged, so that a test
// that kills it at a random moment knows which batches must have survived.
//
// Batch n creates the relationships batch:<n>#member@user:<0..size-1>, where size
// is 1 + n%7; every fifth batch goes through BulkLoad, the others through Write.
package main

import (
	"context"
	"flag"
	"fmt"
	"iter"
	"os"
	"time"

	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/store"
	"github.com/latch-authz/latch/internal/store/pebble"
)

func main() {
	dir := flag.String("dir", "", "data directory")
	start := flag.Int("start", 1, "number of the first batch")
	count := flag.Int("count", 1<<30, "number of batches to write")
	linger := flag.Bool("linger", false, "keep the store open after the last batch until killed")
	flag.Parse()
	if err := run(*dir, *start, *count, *linger); err != nil {
		fmt.Fprintln(os.Stderr, "crashtest:", err)
		os.Exit(1)
	}
}

func run(dir string, start, count int, linger bool) error {
	s, err := pebble.Open(dir, pebble.Options{GCInterval: -1})
	if err != nil {
		return err
	}
	defer s.Close()
	ctx := context.Background()
	for n := start; n < start+count; n++ {
		rels := Batch(n)
		var rev store.Revision
		if n%5 == 0 {
			rev, err = s.BulkLoad(ctx, seq(rels))
		} else {
			us := make([]store.Update, len(rels))
			for i, r := range rels {
				us[i] = store.Update{Op: store.Create, Relationship: r}
			}
			rev, err = s.Write(ctx, nil, us, nil)
		}
		if err != nil {
			return fmt.Errorf("batch %d: %w", n, err)
		}
		fmt.Printf("ack %d %d\n", n, rev)
	}
	if linger {
		time.Sleep(time.Hour)
	}
	return nil
}

// Batch returns the relationships of batch n.
func Batch(n int) []rel.Relationship {
	out := make([]rel.Relationship, 1+n%7)
	for i := range out {
		out[i] = rel.Relationship{
			Resource: rel.ObjectRef{Type: "batch", ID: fmt.Sprint(n)}, Relation: "member",
			Subject: rel.SubjectRef{Object: rel.ObjectRef{Type: "user", ID: fmt.Sprint(i)}},
		}
	}
	return out
}

func seq(rels []rel.Relationship) iter.Seq2[rel.Relationship, error] {
	return func(yield func(rel.Relationship, error) bool) {
		for _, r := range rels {
			if !yield(r, nil) {
				return
			}
		}
	}
}
