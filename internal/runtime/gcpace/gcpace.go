// Package gcpace tunes the Go garbage collector of a latch server process: a large,
// fixed, pointer-free cache, or the tables of an in-memory store, should not count
// towards the headroom GOGC grants.
package gcpace

import (
	"context"
	"os"
	"runtime/debug"
	rtmetrics "runtime/metrics"
	"strconv"
	"time"
)

// minGCHeadroom is the least garbage the heap may gather between collections: below
// it collections become frequent enough to cost real CPU under load (a memory store
// answering 28,000 checks/s with 16 MiB collected 25 times a second and served 15%
// fewer checks than with 48 MiB, which cost 16 MiB more RSS than 32 MiB for a few
// percent).
const minGCHeadroom = 32 << 20

// interval is how often Run looks at the live heap.
const interval = time.Second

// Run keeps the garbage collector's headroom proportional to the heap that changes,
// until ctx is done. Go lets the heap grow by GOGC percent (100 unless set) of all the
// live heap before collecting, the dispatch cache included; that cache is one fixed,
// pointer-free block that never becomes garbage, so counting it would let a 64 MiB cache
// add another 64 MiB of garbage to the process's memory (and a memory store's tables
// as much again). Run sets the GC percent so that the headroom is GOGC percent of the
// live heap other than the bytes fixed reports (asked each time it looks), and at least
// minGCHeadroom. With GOGC=off it does nothing.
//
// It changes a process-wide setting, so only the process's owner (the serve command)
// calls it, once.
func Run(ctx context.Context, fixed func() int64) {
	base := 100
	if v := os.Getenv("GOGC"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return // "off", or a value the runtime itself ignores
		}
		base = n
	}
	sample := []rtmetrics.Sample{{Name: "/gc/heap/live:bytes"}}
	t := time.NewTicker(interval)
	defer t.Stop()
	current := -1
	for {
		rtmetrics.Read(sample)
		if sample[0].Value.Kind() == rtmetrics.KindUint64 {
			if p := gcPercent(sample[0].Value.Uint64(), uint64(max(fixed(), 0)), base); p != current {
				debug.SetGCPercent(p)
				current = p
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// gcPercent is the GC percent that gives a heap of live bytes, fixed of which never
// change, a headroom of base percent of the rest (at least minGCHeadroom). It never
// exceeds base: the headroom is never larger than GOGC would make it.
func gcPercent(live, fixed uint64, base int) int {
	if live == 0 || base == 0 {
		return base
	}
	changing := live - min(fixed, live)
	headroom := max(changing*uint64(base)/100, minGCHeadroom)
	return int(min(max(headroom*100/live, 1), uint64(base)))
}
