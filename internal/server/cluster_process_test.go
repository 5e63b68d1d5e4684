package server

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	v1 "github.com/authzed/authzed-go/proto/authzed/api/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/latch-authz/latch/internal/engine/enginetest"
	"github.com/latch-authz/latch/internal/store/postgres"
	"github.com/latch-authz/latch/internal/store/postgres/pgtest"
)

// processNode is one `latch serve` process of a test cluster.
type processNode struct {
	*testServer
	name         string
	bin          string   // the latch binary
	args         []string // its command line
	cmd          *exec.Cmd
	exited       chan struct{} // closed when the process has been waited for
	dispatchAddr string
	metricsAddr  string
	log          string // the process's output, a file
}

// buildLatch compiles cmd/latch into the test's temporary directory.
func buildLatch(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "latch")
	build := exec.Command("go", "build", "-o", bin, "./cmd/latch")
	build.Dir = moduleRoot(t)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/latch: %v\n%s", err, out)
	}
	return bin
}

// startProcessCluster starts n `latch serve` processes on the PostgreSQL database at
// uri as one cluster (static members), each with extra flags, and stops them when the
// test ends.
func startProcessCluster(t *testing.T, n int, uri string, extra ...string) []*processNode {
	t.Helper()
	bin := buildLatch(t)
	nodes := make([]*processNode, n)
	var members []string
	addrs := freeAddrs(t, 3*n)
	for i := range nodes {
		nodes[i] = &processNode{
			testServer:   &testServer{grpcAddr: addrs[3*i]},
			name:         fmt.Sprintf("node%d", i),
			bin:          bin,
			dispatchAddr: addrs[3*i+1],
			metricsAddr:  addrs[3*i+2],
			log:          filepath.Join(t.TempDir(), fmt.Sprintf("node%d.log", i)),
		}
		members = append(members, nodes[i].dispatchAddr)
	}
	for _, nd := range nodes {
		nd.args = append([]string{
			"serve", "--datastore-engine", "postgres", "--datastore-conn-uri", uri,
			"--grpc-preshared-key", testKey, "--grpc-addr", nd.grpcAddr, "--http-addr", "-",
			"--metrics-addr", nd.metricsAddr, "--log-level", "warn",
			"--dispatch-cluster-enabled", "--dispatch-cluster-addr", nd.dispatchAddr,
			"--dispatch-upstream-addr", "static:///" + strings.Join(members, ","),
		}, extra...)
		nd.launch(t)
		nd.conn = dial(t, nd.grpcAddr, testKey)
		nd.perms = v1.NewPermissionsServiceClient(nd.conn)
		nd.schema = v1.NewSchemaServiceClient(nd.conn)
		t.Cleanup(func() {
			_ = nd.conn.Close()
			_ = nd.cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-nd.exited:
			case <-time.After(10 * time.Second):
				_ = nd.cmd.Process.Kill()
				<-nd.exited
			}
			if t.Failed() {
				out, _ := os.ReadFile(nd.log)
				t.Logf("%s's log:\n%s", nd.name, tail(string(out), 3000))
			}
		})
	}
	for _, nd := range nodes {
		nd.waitReady(t)
	}
	return nodes
}

// launch starts the node's process (again, after a kill: its log goes on).
func (nd *processNode) launch(t *testing.T) {
	t.Helper()
	logFile, err := os.OpenFile(nd.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	nd.cmd = exec.Command(nd.bin, nd.args...)
	nd.cmd.Stdout, nd.cmd.Stderr = logFile, logFile
	if err := nd.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", nd.name, err)
	}
	_ = logFile.Close()
	exited, cmd := make(chan struct{}), nd.cmd
	nd.exited = exited
	go func() { _ = cmd.Wait(); close(exited) }()
}

// waitReady waits until the node answers on its gRPC address.
func (nd *processNode) waitReady(t *testing.T) {
	t.Helper()
	for ready := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := nd.schema.ReadSchema(ctx, &v1.ReadSchemaRequest{})
		cancel()
		if code := status.Code(err); code != codes.Unavailable && code != codes.DeadlineExceeded {
			return
		}
		select {
		case <-nd.exited:
			out, _ := os.ReadFile(nd.log)
			t.Fatalf("%s exited at start:\n%s", nd.name, out)
		default:
		}
		if time.Now().After(ready) {
			t.Fatalf("%s did not answer on %s within 30 s: %v", nd.name, nd.grpcAddr, err)
		}
	}
}

// metric sums the series named name (any labels) on the node's /metrics, keeping
// those whose labels contain every one of labels (`peer="127.0.0.1:1234"`).
func (nd *processNode) metric(t *testing.T, name string, labels ...string) float64 {
	t.Helper()
	var sum float64
	for _, line := range strings.Split(scrape(t, nd.metricsAddr), "\n") {
		series, value, ok := strings.Cut(line, " ")
		if !ok || (series != name && !strings.HasPrefix(series, name+"{")) || !allIn(series, labels) {
			continue
		}
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			t.Fatalf("%s /metrics: %q: %v", nd.name, line, err)
		}
		sum += v
	}
	return sum
}

func allIn(s string, subs []string) bool {
	for _, x := range subs {
		if !strings.Contains(s, x) {
			return false
		}
	}
	return true
}

// definitionName finds the definitions of a schema, to delete their relationships.
var definitionName = regexp.MustCompile(`(?m)^\s*definition\s+([a-zA-Z0-9_/]+)`)

// clearAll deletes every relationship of the definitions of the schema in force, then
// the schema, so that any schema may be written next.
func (ts *testServer) clearAll(t *testing.T) {
	t.Helper()
	resp, err := ts.schema.ReadSchema(ctxT(t), &v1.ReadSchemaRequest{})
	if status.Code(err) == codes.NotFound {
		return
	} else if err != nil {
		t.Fatal(err)
	}
	for _, m := range definitionName.FindAllStringSubmatch(resp.GetSchemaText(), -1) {
		_, err := ts.perms.DeleteRelationships(ctxT(t), &v1.DeleteRelationshipsRequest{RelationshipFilter: &v1.RelationshipFilter{ResourceType: m[1]}})
		if err != nil {
			t.Fatalf("deleting the relationships of %s: %v", m[1], err)
		}
	}
	// Then the schema, so that the next one starts from nothing: a schema may not
	// retype a parameter of a caveat it keeps, as conformance files sharing a caveat's
	// name do.
	if _, err := ts.schema.WriteSchema(ctxT(t), &v1.WriteSchemaRequest{}); err != nil {
		t.Fatalf("clearing the schema: %v", err)
	}
}

// TestClusterProcessAnswersAsOneNode starts 3 `latch serve` processes as a cluster over
// one PostgreSQL database. Every shared conformance file is written through one node
// and asserted (checks and lookups) through each; then random schemas with caveats,
// expiration and cycles are compared, every check and lookup, between a single latch
// and each node. Every node must have sent and received dispatches, and none failed.
func TestClusterProcessAnswersAsOneNode(t *testing.T) {
	files := conformanceFiles(t)
	uri := pgtest.Get(t).NewDatabase(t, "latch_migrated", postgres.Migrate)
	nodes := startProcessCluster(t, 3, uri)
	for i, f := range files {
		writer := nodes[i%len(nodes)]
		writer.clearAll(t)
		t.Run(f.name, func(t *testing.T) {
			writer.loadConformance(t, f.conformanceFile)
			for _, nd := range nodes {
				nd.assertConformance(t, f.conformanceFile)
			}
		})
	}
	nodes[0].clearAll(t)

	single := start(t, nil)
	const cases = 12
	// A bound on a hung cluster, not a timing: under the whole suite on two cores the
	// twelve cases have taken more than three minutes.
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	d := &differ{t: t, ctx: ctx, gen: enginetest.AllTraits, apis: []authzAPI{{name: "single", schema: single.schema, perms: single.perms}}}
	for i, nd := range nodes {
		d.apis = append(d.apis, authzAPI{name: nd.name, schema: nd.schema, perms: nd.perms, shared: i > 0})
	}
	for seed := range uint64(cases) {
		if !d.runCase(seed) {
			t.Fatalf("stopping at the first disagreeing schema")
		}
	}
	t.Logf("%d random schemas compared (%d refused by both), %d answers agreed on every node", d.cases, d.bothRefused, d.agreed)
	if d.cases == 0 || d.oneRefused > 0 {
		t.Fatalf("%d schemas compared, %d accepted by only one of a single node and the cluster", d.cases, d.oneRefused)
	}
	for _, nd := range nodes {
		sent, received := nd.metric(t, "latch_cluster_dispatch_sent_total"), nd.metric(t, "latch_cluster_dispatch_received_total")
		failed := nd.metric(t, "latch_cluster_dispatch_failed_total")
		t.Logf("%s: %v dispatches sent, %v received, %v failed", nd.name, sent, received, failed)
		if sent == 0 || received == 0 || failed != 0 {
			t.Errorf("%s sent %v, received %v and failed %v dispatches: every node of a healthy cluster sends and receives, and none fails", nd.name, sent, received, failed)
		}
	}
}

// everyCheckDispatches are the flags of a cluster node that answers no check without
// dispatching: no cache, and no index of nested sets (which answers killSchema's
// checks itself).
var everyCheckDispatches = []string{"--dispatch-cache-max-bytes", "-1", "--materialize-enabled=false"}

// killSchema: doc#view reaches users through a chain of nested groups, so that every
// check takes dispatched steps.
const killSchema = `definition user {}
definition group { relation member: user | group#member }
definition doc {
	relation viewer: group#member
	permission view = viewer
}`

// TestClusterProcessKill runs a check load through two nodes of a 3-process cluster
// (no cache and no index of nested sets, so every check dispatches) and kills the
// third with SIGKILL in the middle of it. No answer may be wrong; once both survivors have marked the dead node down,
// no check may fail; the time that takes is reported.
func TestClusterProcessKill(t *testing.T) {
	uri := pgtest.Get(t).NewDatabase(t, "latch_migrated", postgres.Migrate)
	nodes := startProcessCluster(t, 3, uri, everyCheckDispatches...)
	load := startCheckLoad(t, nodes[0], nodes[:2])
	defer load.end()

	time.Sleep(1500 * time.Millisecond)
	dead := nodes[2]
	peer := fmt.Sprintf("peer=%q", dead.dispatchAddr)
	for _, nd := range nodes[:2] {
		if up := nd.metric(t, "latch_cluster_peer_up", peer); up != 1 {
			t.Fatalf("%s shows latch_cluster_peer_up{%s} %v before the kill, want 1", nd.name, peer, up)
		}
	}
	killed := time.Now()
	if err := dead.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-dead.exited
	// Both survivors mark the dead node down; then the load goes on for a while.
	var down time.Time
	for deadline := killed.Add(20 * time.Second); down.IsZero(); time.Sleep(20 * time.Millisecond) {
		if nodes[0].metric(t, "latch_cluster_peer_up", peer) == 0 && nodes[1].metric(t, "latch_cluster_peer_up", peer) == 0 {
			down = time.Now()
		}
		if time.Now().After(deadline) {
			t.Fatalf("the survivors did not mark the killed node down within 20 s")
		}
	}
	time.Sleep(2 * time.Second)
	outcomes := load.end()

	var before, after, errsBefore, errsAfter, wrong int
	var firstErr error
	for _, o := range outcomes {
		if o.wrong {
			wrong++
		}
		if o.err != nil && firstErr == nil {
			firstErr = o.err
		}
		switch {
		case o.at.Before(killed):
			before++
		case o.at.After(down):
			after++
			if o.err != nil {
				errsAfter++
			}
		default:
			if o.err != nil {
				errsBefore++
			}
		}
	}
	t.Logf("reliability: cluster, kill -9 of 1 of 3 nodes under check load: %d checks (%d before the kill, %d after the mark-down), %d wrong, %d errors between kill and mark-down, %d after; marked down %d ms after the kill",
		len(outcomes), before, after, wrong, errsBefore, errsAfter, down.Sub(killed).Milliseconds())
	if wrong > 0 || errsAfter > 0 || before == 0 || after == 0 {
		t.Errorf("%d wrong answers, %d errors after the mark-down (first error: %v), %d checks before the kill and %d after the mark-down",
			wrong, errsAfter, firstErr, before, after)
	}
	if slices.ContainsFunc(nodes[:2], func(nd *processNode) bool { return nd.metric(t, "latch_cluster_dispatch_fallbacks_total") == 0 }) {
		t.Errorf("a survivor answered no failed dispatch locally: the killed node was not dispatched to under load")
	}
}

// checkLoad is a check load over killSchema's nested groups, through some nodes of a
// cluster, with every outcome recorded.
type checkLoad struct {
	mu       sync.Mutex
	outcomes []checkOutcome // guarded by mu
	stop     atomic.Bool
	wg       sync.WaitGroup
}

type checkOutcome struct {
	at    time.Time
	err   error
	wrong bool
}

// startCheckLoad writes killSchema's data through writer and starts 8 workers checking
// it, fully consistent, round-robin through via.
func startCheckLoad(t *testing.T, writer *processNode, via []*processNode) *checkLoad {
	t.Helper()
	const groups, users, docs = 12, 60, 48
	writer.writeSchema(t, killSchema)
	var rs []*v1.Relationship
	for g := range groups - 1 { // g(i) holds g(i+1)'s members
		rs = append(rs, relationship("group", fmt.Sprint("g", g), "member", "group", fmt.Sprint("g", g+1), "member"))
	}
	for u := range users {
		rs = append(rs, relationship("group", fmt.Sprint("g", u%groups), "member", "user", fmt.Sprint("u", u), ""))
	}
	for d := range docs {
		rs = append(rs, relationship("doc", fmt.Sprint("d", d), "viewer", "group", fmt.Sprint("g", d%groups), "member"))
	}
	writer.write(t, rs...)
	// user u views doc d when u's group is d's group or nested in it.
	granted := func(u, d int) bool { return u%groups >= d%groups }
	l := &checkLoad{}
	for w := range 8 {
		nd := via[w%len(via)]
		l.wg.Go(func() {
			for i := w; !l.stop.Load(); i += 8 {
				u, d := i*7%users, i*5%docs
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				resp, err := nd.perms.CheckPermission(ctx, &v1.CheckPermissionRequest{
					Consistency: fullyConsistent(), Resource: obj("doc", fmt.Sprint("d", d)), Permission: "view",
					Subject: sub("user", fmt.Sprint("u", u), ""),
				})
				cancel()
				want := v1.CheckPermissionResponse_PERMISSIONSHIP_NO_PERMISSION
				if granted(u, d) {
					want = v1.CheckPermissionResponse_PERMISSIONSHIP_HAS_PERMISSION
				}
				l.mu.Lock()
				l.outcomes = append(l.outcomes, checkOutcome{time.Now(), err, err == nil && resp.GetPermissionship() != want})
				l.mu.Unlock()
			}
		})
	}
	return l
}

// end stops the load (again: later calls return at once) and returns its outcomes.
func (l *checkLoad) end() []checkOutcome {
	l.stop.Store(true)
	l.wg.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.outcomes
}
