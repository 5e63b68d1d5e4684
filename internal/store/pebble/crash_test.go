package pebble

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/latch-authz/latch/internal/store"
)

// TestCrashRecovery builds internal/crashtest, which writes numbered batches and
// prints each acknowledged one, kills it with SIGKILL at random moments, and after
// each kill reopens the directory and checks that every acknowledged batch is there,
// at the revision it was acknowledged with, and that no batch is there in part.
func TestCrashRecovery(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs a helper program")
	}
	bin := filepath.Join(t.TempDir(), "crashtest")
	build := exec.Command("go", "build", "-o", bin, "./internal/crashtest")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the crash test helper: %v\n%s", err, out)
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rnd := rand.New(rand.NewPCG(seed, 1))
	dir := t.TempDir()
	probeLock(t, bin, dir)
	const minKills, maxKills, budget = 50, 80, 20 * time.Second
	start := time.Now()
	next, acked := 2, 0 // probeLock wrote batch 1
	kills := 0
	for ; kills < maxKills && (kills < minKills || time.Since(start) < budget); kills++ {
		// Every other run is killed only once it has acknowledged a batch, so that
		// writes are cut at every stage however slowly a loaded machine starts the
		// helper; the others may die while it opens the store.
		acks := runAndKill(t, bin, dir, next, kills%2 == 0, time.Duration(rnd.IntN(60))*time.Millisecond)
		acked += len(acks)
		next = verifyBatches(t, dir, acks, next)
	}
	t.Logf("reliability: pebble kill -9: %d kills, %d acknowledged batches, %d batches in the store, 0 lost, 0 partial, %v", kills, acked, next-1, time.Since(start).Round(time.Millisecond))
	if acked < kills/2 {
		t.Fatalf("only %d batches were acknowledged in %d runs, half of which waited for one", acked, kills)
	}
}

// probeLock runs the helper until it has acknowledged a write and checks that the
// directory cannot be opened meanwhile.
func probeLock(t *testing.T, bin, dir string) {
	t.Helper()
	cmd := exec.Command(bin, "-dir", dir, "-start", "1", "-count", "1", "-linger")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}()
	if !bufio.NewScanner(out).Scan() {
		t.Fatal("the helper acknowledged nothing")
	}
	_, err = Open(dir, Options{})
	if !errors.Is(err, ErrInUse) || !strings.Contains(err.Error(), "is in use by another process") {
		t.Fatalf("open of a directory another process has open: %v", err)
	}
}

// ack is one acknowledged batch.
type ack struct {
	batch int
	rev   store.Revision
}

// runAndKill starts the helper at batch first, kills it after d (counted from its
// first acknowledgement when afterAck is set) and returns the batches it acknowledged.
func runAndKill(t *testing.T, bin, dir string, first int, afterAck bool, d time.Duration) []ack {
	t.Helper()
	cmd := exec.Command(bin, "-dir", dir, "-start", strconv.Itoa(first))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan []ack, 1)
	acked := make(chan struct{}) // closed at the first acknowledgement or the end of output
	go func() {
		var acks []ack
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			var a ack
			if _, err := fmt.Sscanf(sc.Text(), "ack %d %d", &a.batch, &a.rev); err == nil {
				if acks = append(acks, a); len(acks) == 1 {
					close(acked)
				}
			}
		}
		if len(acks) == 0 {
			close(acked)
		}
		lines <- acks
	}()
	if afterAck {
		<-acked
	}
	time.Sleep(d)
	_ = cmd.Process.Signal(syscall.SIGKILL)
	acks := <-lines
	err = cmd.Wait()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() {
		t.Fatalf("the helper ended before it was killed (%v): %s", err, stderr.String())
	}
	return acks
}

// verifyBatches opens dir and checks every batch in it and every acknowledged one.
// It returns the number of the first batch not in the store.
func verifyBatches(t *testing.T, dir string, acks []ack, first int) int {
	t.Helper()
	ctx := context.Background()
	s, err := Open(dir, Options{GCInterval: -1})
	if err != nil {
		t.Fatalf("reopening after a kill: %v", err)
	}
	defer s.Close()
	head, _ := s.HeadRevision(ctx)
	counts := map[string]int{}
	for _, r := range readAll(t, s, head, store.Filter{ResourceType: "batch"}) {
		counts[r.Resource.ID]++
	}
	next := first
	for id, n := range counts {
		b, err := strconv.Atoi(id)
		if err != nil {
			t.Fatalf("unexpected batch id %q", id)
		}
		if want := 1 + b%7; n != want {
			t.Fatalf("batch %d has %d of its %d relationships after a kill", b, n, want)
		}
		next = max(next, b+1)
	}
	if len(counts) != next-1 {
		t.Fatalf("the store holds %d batches, but the highest is %d: one went missing", len(counts), next-1)
	}
	for _, a := range acks {
		if counts[strconv.Itoa(a.batch)] == 0 {
			t.Fatalf("acknowledged batch %d (revision %d) is missing after a kill", a.batch, a.rev)
		}
		f := store.Filter{ResourceType: "batch", ResourceIDs: []string{strconv.Itoa(a.batch)}}
		if n := len(readAll(t, s, a.rev, f)); n != 1+a.batch%7 {
			t.Fatalf("acknowledged batch %d is not whole at its revision %d: %d relationships", a.batch, a.rev, n)
		}
		if a.rev > 2 && len(readAll(t, s, a.rev-1, f)) != 0 {
			t.Fatalf("acknowledged batch %d is visible before its revision %d", a.batch, a.rev)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, bulkTmp)); err == nil {
		t.Fatalf("%s was left behind after recovery", bulkTmp)
	}
	return next
}
