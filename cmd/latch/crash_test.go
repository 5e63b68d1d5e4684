package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "github.com/authzed/authzed-go/proto/authzed/api/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
)

const (
	crashKey       = "crash-test-key"
	crashSchema    = "definition user {}\ndefinition doc {\n\trelation viewer: user\n}"
	relsPerBatch   = 3
	minCrashKills  = 50
	crashRunBudget = 25 * time.Second
)

var listening = regexp.MustCompile(`gRPC API listening on (\S+)`)

// TestServeSurvivesKill9 runs `latch serve` on the default embedded store, writes
// numbered batches through the gRPC API, and kills the server with SIGKILL at random
// moments, at least 50 times. After each restart every acknowledged batch must be
// there, and no batch may be there in part.
func TestServeSurvivesKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("builds latch and runs it as a child process")
	}
	bin := filepath.Join(t.TempDir(), "latch")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("building latch: %v\n%s", err, out)
	}
	dir := t.TempDir()
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rnd := rand.New(rand.NewPCG(seed, 2))

	acked := map[int]bool{}
	next := 0
	start := time.Now()
	kills := 0
	for ; kills < minCrashKills || (time.Since(start) < crashRunBudget && kills < 2*minCrashKills); kills++ {
		srv := startLatch(t, bin, dir)
		client := srv.client(t)
		if kills == 0 {
			if _, err := v1.NewSchemaServiceClient(client.conn).WriteSchema(client.ctx, &v1.WriteSchemaRequest{Schema: crashSchema}); err != nil {
				t.Fatalf("WriteSchema: %v", err)
			}
		}
		verifyBatches(t, client, acked, next)
		killAt := time.Now().Add(time.Duration(rnd.IntN(40)) * time.Millisecond)
		done := make(chan []int)
		go func() { done <- writeUntilFailure(client, next) }()
		time.Sleep(time.Until(killAt))
		srv.kill()
		written := <-done
		for _, b := range written {
			acked[b] = true
		}
		next += len(written) + 1 // the batch in flight at the kill may or may not be there
		client.close()
	}
	srv := startLatch(t, bin, dir)
	client := srv.client(t)
	verifyBatches(t, client, acked, next)
	client.close()
	srv.stop(t)
	t.Logf("%d kills, %d acknowledged batches, %v", kills, len(acked), time.Since(start).Round(time.Millisecond))
	if len(acked) < minCrashKills {
		t.Fatalf("only %d batches were acknowledged over %d runs; the server hardly ran", len(acked), kills)
	}
}

type latchProcess struct {
	cmd  *exec.Cmd
	addr string
}

func startLatch(t *testing.T, bin, dir string) *latchProcess {
	t.Helper()
	cmd := exec.Command(bin, "serve", "--data-dir", dir, "--grpc-addr", "127.0.0.1:0", "--http-addr", "-",
		"--grpc-preshared-key", crashKey, "--metrics-addr", "-")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(out)
	for lines.Scan() {
		if m := listening.FindStringSubmatch(lines.Text()); m != nil {
			go func() { _, _ = io.Copy(io.Discard, out) }()
			return &latchProcess{cmd: cmd, addr: m[1]}
		}
	}
	_ = cmd.Wait()
	t.Fatalf("latch serve exited before listening: %s", stderr.String())
	return nil
}

func (p *latchProcess) kill() {
	_ = p.cmd.Process.Kill()
	_ = p.cmd.Wait()
}

func (p *latchProcess) stop(t *testing.T) {
	t.Helper()
	_ = p.cmd.Process.Signal(os.Interrupt)
	if err := p.cmd.Wait(); err != nil {
		t.Errorf("latch serve did not stop cleanly: %v", err)
	}
}

type crashClient struct {
	conn  *grpc.ClientConn
	perms v1.PermissionsServiceClient
	ctx   context.Context
}

func (p *latchProcess) client(t *testing.T) *crashClient {
	t.Helper()
	conn, err := grpc.NewClient(p.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	ctx := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+crashKey)
	return &crashClient{conn: conn, perms: v1.NewPermissionsServiceClient(conn), ctx: ctx}
}

func (c *crashClient) close() { _ = c.conn.Close() }

// writeUntilFailure writes batches first, first+1, ... until a write fails (the
// server was killed) and returns the batches that were acknowledged.
func writeUntilFailure(c *crashClient, first int) []int {
	var acked []int
	for b := first; ; b++ {
		var updates []*v1.RelationshipUpdate
		for i := range relsPerBatch {
			updates = append(updates, &v1.RelationshipUpdate{
				Operation: v1.RelationshipUpdate_OPERATION_CREATE,
				Relationship: &v1.Relationship{
					Resource: &v1.ObjectReference{ObjectType: "doc", ObjectId: "b" + strconv.Itoa(b)},
					Relation: "viewer",
					Subject:  &v1.SubjectReference{Object: &v1.ObjectReference{ObjectType: "user", ObjectId: fmt.Sprintf("u%d", i)}},
				},
			})
		}
		ctx, cancel := context.WithTimeout(c.ctx, 5*time.Second)
		_, err := c.perms.WriteRelationships(ctx, &v1.WriteRelationshipsRequest{Updates: updates})
		cancel()
		if err != nil {
			return acked
		}
		acked = append(acked, b)
	}
}

// verifyBatches reads every doc relationship and checks that each acknowledged batch
// is whole and that no batch at all is there in part.
func verifyBatches(t *testing.T, c *crashClient, acked map[int]bool, next int) {
	t.Helper()
	stream, err := c.perms.ReadRelationships(c.ctx, &v1.ReadRelationshipsRequest{
		Consistency:        &v1.Consistency{Requirement: &v1.Consistency_FullyConsistent{FullyConsistent: true}},
		RelationshipFilter: &v1.RelationshipFilter{ResourceType: "doc"},
	})
	if err != nil {
		t.Fatalf("ReadRelationships: %v", err)
	}
	count := map[int]int{}
	for {
		resp, err := stream.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("ReadRelationships: %v", err)
		}
		b, err := strconv.Atoi(strings.TrimPrefix(resp.GetRelationship().GetResource().GetObjectId(), "b"))
		if err != nil {
			t.Fatalf("unexpected relationship %v", resp.GetRelationship())
		}
		count[b]++
	}
	for b := range acked {
		if count[b] != relsPerBatch {
			t.Fatalf("acknowledged batch %d has %d of %d relationships after a restart", b, count[b], relsPerBatch)
		}
	}
	for b, n := range count {
		if n != relsPerBatch {
			t.Fatalf("batch %d is there in part: %d of %d relationships", b, n, relsPerBatch)
		}
		if b >= next {
			t.Fatalf("batch %d is there but was never written", b)
		}
	}
}
