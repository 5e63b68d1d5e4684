package cluster

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/latch-authz/latch/internal/caveat"
	"github.com/latch-authz/latch/internal/engine"
	"github.com/latch-authz/latch/internal/engine/cache"
	"github.com/latch-authz/latch/internal/engine/enginetest"
	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/schema"
	"github.com/latch-authz/latch/internal/schema/ir"
	"github.com/latch-authz/latch/internal/store"
	"github.com/latch-authz/latch/internal/store/memory"
	"github.com/latch-authz/latch/internal/tlsconfig"
	"github.com/latch-authz/latch/internal/tlsconfig/tlstest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// node is one in-process cluster member: its engine (own cache), its view of the
// cluster and its dispatch service on loopback.
type node struct {
	c   *Cluster
	eng *engine.Engine
	g   *grpc.Server
	lis net.Listener
	reg *prometheus.Registry
}

// testCluster runs n nodes over st; schemas holds the schema the test uses at each
// revision (dispatches may still be in flight, hedged, when the test moves on).
type testCluster struct {
	nodes   []*node
	schemas sync.Map // store.Revision → *ir.Schema
}

// use records that the test reads at r under s.
func (tc *testCluster) use(r store.Reader, s *ir.Schema) { tc.schemas.Store(r.Revision(), s) }

func startCluster(t *testing.T, n int, st store.Store, delays ...time.Duration) *testCluster {
	t.Helper()
	return startClusterWith(t, n, st, func(i int, _ *Config, opts *ServiceOptions) {
		if i < len(delays) {
			opts.Delay = delays[i]
		}
	})
}

// startClusterWith is startCluster with each node's configuration and service options
// adjusted by adjust.
func startClusterWith(t *testing.T, n int, st store.Store, adjust func(i int, cfg *Config, opts *ServiceOptions)) *testCluster {
	t.Helper()
	tc := &testCluster{}
	addrs := make([]string, n)
	for i := range n {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addrs[i] = lis.Addr().String()
		tc.nodes = append(tc.nodes, &node{lis: lis, reg: prometheus.NewRegistry()})
	}
	for i, nd := range tc.nodes {
		cfg := Config{Addr: addrs[i], Upstream: "static:///" + strings.Join(addrs, ","), PresharedKey: "k", Registerer: nd.reg}
		var opts ServiceOptions
		adjust(i, &cfg, &opts)
		c, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		nd.c = c
		tc.serve(nd, st, opts)
	}
	t.Cleanup(func() {
		for _, nd := range tc.nodes {
			nd.stop()
		}
	})
	return tc
}

// serve gives nd a fresh engine (an empty cache) and serves its dispatch service on
// nd.lis, answering from st.
func (tc *testCluster) serve(nd *node, st store.Store, opts ServiceOptions) {
	nd.eng = engine.New(engine.Config{MaxDepth: 12, Cache: cache.New(1 << 16), Dispatcher: nd.c})
	eng := nd.eng
	nd.g = nd.c.NewServer(func(ctx context.Context, sp *engine.Subproblem) (*engine.Answers, error) {
		r, err := st.Reader(ctx, sp.Revision)
		if err != nil {
			return nil, err
		}
		s, ok := tc.schemas.Load(sp.Revision)
		if !ok {
			return nil, fmt.Errorf("no schema at revision %d", sp.Revision)
		}
		return eng.AnswerDispatched(ctx, s.(*ir.Schema), r, sp)
	}, opts)
	g, lis := nd.g, nd.lis
	go func() { _ = g.Serve(lis) }()
}

// stop takes the node out: its service stops answering (as if killed).
func (nd *node) stop() {
	nd.g.Stop()
	nd.c.Close()
}

func counter(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	total := 0.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			total += m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	return total
}

// TestClusterAnswersAsOneNode asks random checks of random schemas (caveats,
// expiration, cycles) through every node of a 3-node cluster and of a single engine:
// answers, missing parameters and depth errors must be the same.
func TestClusterAnswersAsOneNode(t *testing.T) {
	const schemas, checksPerSchema = 40, 30
	ctx := context.Background()
	single := engine.New(engine.Config{MaxDepth: 12})
	st := memory.New(memory.Options{})
	defer st.Close()
	tc := startCluster(t, 3, st)
	compared := 0
	for seed := range uint64(schemas) {
		g := enginetest.New(rand.New(rand.NewPCG(seed, 11)), enginetest.Options{Caveats: true, Expiration: true, CaveatErrors: true})
		src := g.Schema()
		s, err := schema.Compile(src)
		if err != nil {
			continue
		}
		now := time.Now()
		rels := g.Relationships(10+g.Rnd.IntN(30), now)
		// Each schema gets a fresh store revision: remove the last one's data first.
		if _, _, _, err := st.DeleteByFilter(ctx, nil, store.Filter{}, 0, false); err != nil {
			t.Fatal(err)
		}
		updates := make([]store.Update, len(rels))
		for i, x := range rels {
			updates[i] = store.Update{Op: store.Create, Relationship: x}
		}
		rev, err := st.Write(ctx, nil, updates, nil)
		if err != nil {
			t.Fatal(err)
		}
		reader, err := st.Reader(ctx, rev)
		if err != nil {
			t.Fatal(err)
		}
		tc.use(reader, s)
		var bulk []engine.CheckRequest
		for range checksPerSchema {
			d := g.Pick(g.Defs[1:])
			perm := g.Pick(append(slices.Clone(g.Rels[d]), g.Perms[d]...))
			subj := rel.SubjectRef{Object: g.Object("user")}
			if g.Rnd.IntN(5) == 0 {
				subj = g.SubjectSet()
			}
			req := engine.CheckRequest{Resource: g.Object(d), Permission: perm, Subject: subj, Context: g.Context()}
			bulk = append(bulk, req)
			want, wantErr := single.Check(ctx, s, reader, req)
			for i, nd := range tc.nodes {
				got, err := nd.eng.Check(ctx, s, reader, req)
				if !sameAnswer(want, wantErr, got, err) {
					t.Fatalf("seed %d node %d: %v:%v#%s@%v ctx %v: cluster %v %v %v, one node %v %v %v\nschema:\n%s\nrels:\n%s",
						seed, i, req.Resource.Type, req.Resource.ID, perm, subj, req.Context, got.Membership, got.Missing, err,
						want.Membership, want.Missing, wantErr, src, enginetest.Dump(rels))
				}
				compared++
			}
		}
		want := single.CheckBulk(ctx, s, reader, bulk)
		got := tc.nodes[int(seed)%3].eng.CheckBulk(ctx, s, reader, bulk)
		for i := range want {
			if !sameAnswer(want[i].Result, want[i].Err, got[i].Result, got[i].Err) {
				t.Fatalf("seed %d bulk item %d: cluster %v %v, one node %v %v", seed, i, got[i].Result, got[i].Err, want[i].Result, want[i].Err)
			}
		}
	}
	for i, nd := range tc.nodes {
		sent, received := counter(t, nd.reg, "latch_cluster_dispatch_sent_total"), counter(t, nd.reg, "latch_cluster_dispatch_received_total")
		if sent == 0 || received == 0 {
			t.Errorf("node %d sent %v and received %v dispatches: every node should do both", i, sent, received)
		}
		if f := counter(t, nd.reg, "latch_cluster_dispatch_failed_total"); f != 0 {
			t.Errorf("node %d: %v dispatches failed in a healthy cluster", i, f)
		}
	}
	t.Logf("%d checks compared", compared)
}

func sameAnswer(want engine.Result, wantErr error, got engine.Result, err error) bool {
	if wantErr != nil || err != nil {
		// A caveat error that crossed the wire keeps its message and its kind, which
		// the API gives a reason of its own.
		var wantPT, gotPT *caveat.ParamTypeError
		return errors.Is(err, wantErr) || (wantErr != nil && err != nil && err.Error() == wantErr.Error() &&
			errors.As(err, &gotPT) == errors.As(wantErr, &wantPT))
	}
	return want.Membership == got.Membership && slices.Equal(want.Missing, got.Missing)
}

// chain is a schema whose checks take several dispatched steps: doc#view through
// folder parents to a group's members.
const chain = `definition user {}
definition group { relation member: user | group#member }
definition folder {
	relation parent: folder
	relation viewer: group#member
	permission view = viewer + parent->view
}
definition doc {
	relation folder: folder
	permission view = folder->view
}`

// chainData writes docs in nested folders viewable by a group's members, and returns
// the reader and a check for each doc (half granted).
func chainData(t *testing.T, st store.Store) (store.Reader, []engine.CheckRequest, []engine.Membership) {
	t.Helper()
	var lines []string
	add := func(s string) { lines = append(lines, s) }
	add("group:eng#member@user:alice")
	var reqs []engine.CheckRequest
	var want []engine.Membership
	for i := range 10 {
		add(fmt.Sprintf("folder:f%d#parent@folder:f%d", i, i+1))
		add(fmt.Sprintf("doc:d%d#folder@folder:f%d", i, i))
		reqs = append(reqs, engine.CheckRequest{
			Resource: rel.ObjectRef{Type: "doc", ID: fmt.Sprintf("d%d", i)}, Permission: "view",
			Subject: rel.SubjectRef{Object: rel.ObjectRef{Type: "user", ID: "alice"}},
		})
	}
	add("folder:f5#viewer@group:eng#member") // docs d0..d5 are viewable
	for i := range 10 {
		want = append(want, map[bool]engine.Membership{true: engine.HasPermission, false: engine.NoPermission}[i <= 5])
	}
	return touch(t, st, lines...), reqs, want
}

// touch writes the relationships lines name and returns a reader at the revision.
func touch(t *testing.T, st store.Store, lines ...string) store.Reader {
	t.Helper()
	updates := make([]store.Update, len(lines))
	for i, line := range lines {
		x, err := rel.Parse(line)
		if err != nil {
			t.Fatal(err)
		}
		updates[i] = store.Update{Op: store.Touch, Relationship: x}
	}
	rev, err := st.Write(context.Background(), nil, updates, nil)
	if err != nil {
		t.Fatal(err)
	}
	r, err := st.Reader(context.Background(), rev)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func mustCompile(t *testing.T, src string) *ir.Schema {
	t.Helper()
	s, err := schema.Compile(src)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// checkAll asks every check of eng and returns the longest it took.
func checkAll(t *testing.T, eng *engine.Engine, s *ir.Schema, r store.Reader, reqs []engine.CheckRequest, want []engine.Membership) time.Duration {
	t.Helper()
	var longest time.Duration
	for i, req := range reqs {
		start := time.Now()
		got, err := eng.Check(context.Background(), s, r, req)
		longest = max(longest, time.Since(start))
		if err != nil || got.Membership != want[i] {
			t.Fatalf("%v: got %v %v, want %v", req.Resource, got.Membership, err, want[i])
		}
	}
	return longest
}

// TestDeadPeerIsAnsweredForLocally stops one node: checks through the others stay
// right, the dead node is marked down after a few failures, and its share is then
// answered locally without trying it each time.
func TestDeadPeerIsAnsweredForLocally(t *testing.T) {
	st := memory.New(memory.Options{})
	defer st.Close()
	s := mustCompile(t, chain)
	tc := startCluster(t, 3, st)
	r, reqs, want := chainData(t, st)
	tc.use(r, s)
	checkAll(t, tc.nodes[0].eng, s, r, reqs, want)
	tc.nodes[2].stop()
	dead := tc.nodes[2].lis.Addr().String()
	// Checks at new revisions (nothing is answered from the caches) until both
	// survivors have tried the dead peer often enough to mark it down.
	for range 20 {
		r2, reqs, want := chainData(t, st)
		tc.use(r2, s)
		checkAll(t, tc.nodes[0].eng, s, r2, reqs, want)
		checkAll(t, tc.nodes[1].eng, s, r2, reqs, want)
		if testutil.ToFloat64(tc.nodes[0].c.metrics.peerUp.WithLabelValues(dead))+testutil.ToFloat64(tc.nodes[1].c.metrics.peerUp.WithLabelValues(dead)) == 0 {
			break
		}
	}
	for i, nd := range tc.nodes[:2] {
		if up := testutil.ToFloat64(nd.c.metrics.peerUp.WithLabelValues(dead)); up != 0 {
			t.Errorf("node %d still counts the dead peer as up", i)
		}
		if f := counter(t, nd.reg, "latch_cluster_dispatch_failed_total"); f < downAfter || f > 2*downAfter {
			t.Errorf("node %d: %v failed dispatches; want the peer marked down after %d (and at most a probe or two more)", i, f, downAfter)
		}
	}
}

// TestCyclesCostLinearDispatches asks checks over groups that all nest one another
// (every path is a cycle). One node's memory of the subproblems it answered keeps that
// linear; routing every step anew would start that memory afresh at each hop and
// explore the cycles once per path.
func TestCyclesCostLinearDispatches(t *testing.T) {
	st := memory.New(memory.Options{})
	defer st.Close()
	s := mustCompile(t, `definition user {}
definition group { relation member: user | group#member }`)
	tc := startCluster(t, 3, st)
	const groups = 8
	lines := []string{"group:g7#member@user:alice"}
	for i := range groups {
		for j := range groups {
			if i != j {
				lines = append(lines, fmt.Sprintf("group:g%d#member@group:g%d#member", i, j))
			}
		}
	}
	r := touch(t, st, lines...)
	tc.use(r, s)
	single := engine.New(engine.Config{MaxDepth: 12})
	for _, who := range []string{"alice", "bob"} {
		for g := range groups {
			req := engine.CheckRequest{
				Resource: rel.ObjectRef{Type: "group", ID: fmt.Sprint("g", g)}, Permission: "member",
				Subject: rel.SubjectRef{Object: rel.ObjectRef{Type: "user", ID: who}},
			}
			want, wantErr := single.Check(context.Background(), s, r, req)
			before := sentBy(t, tc)
			got, err := tc.nodes[g%3].eng.Check(context.Background(), s, r, req)
			if !sameAnswer(want, wantErr, got, err) {
				t.Fatalf("group:g%d#member@user:%s: cluster %v %v, one node %v %v", g, who, got.Membership, err, want.Membership, wantErr)
			}
			// Routing every level takes thousands here; the top levels, a few dozen.
			if n := sentBy(t, tc) - before; n > 200 {
				t.Errorf("group:g%d#member@user:%s took %v dispatches; the top %d levels take a few dozen", g, who, n, engine.RoutedLevels)
			}
		}
	}
}

// sentBy is the dispatches every node of tc has sent.
func sentBy(t *testing.T, tc *testCluster) float64 {
	t.Helper()
	total := 0.0
	for _, nd := range tc.nodes {
		total += counter(t, nd.reg, "latch_cluster_dispatch_sent_total")
	}
	return total
}

// TestSlowPeerIsHedged makes one node answer dispatches only after a second: checks
// through the others are answered locally long before, and right.
func TestSlowPeerIsHedged(t *testing.T) {
	st := memory.New(memory.Options{})
	defer st.Close()
	s := mustCompile(t, chain)
	tc := startCluster(t, 3, st, time.Second)
	for range 3 {
		r, reqs, want := chainData(t, st) // a new revision each time: no cached answers
		tc.use(r, s)
		// A hedge starts after hedgeInitial (then the healthy peer's p95); a check
		// that waited for the slow peer would take a second.
		if longest := checkAll(t, tc.nodes[1].eng, s, r, reqs, want); longest > 500*time.Millisecond {
			t.Errorf("a check took %v with a slow peer: hedging should have answered it locally", longest)
		}
	}
	reg := tc.nodes[1].reg
	if h, won := counter(t, reg, "latch_cluster_hedges_total"), counter(t, reg, "latch_cluster_hedges_won_total"); h == 0 || won == 0 {
		t.Errorf("hedges %v, won %v: the slow peer should have been hedged around", h, won)
	}
	if f := counter(t, reg, "latch_cluster_dispatch_failed_total"); f != 0 {
		t.Errorf("%v dispatches counted as failed: a slow peer is hedged, not failed", f)
	}
	// Losing races is not failing: however many the slow peer loses, it stays up (it
	// used to be marked down after ten in a row, which took healthy peers out under
	// load and kept a restarted, cold, peer out for good).
	slow := tc.nodes[0].lis.Addr().String()
	won := counter(t, reg, "latch_cluster_hedges_won_total")
	for round := 0; counter(t, reg, "latch_cluster_hedges_won_total") < won+20; round++ {
		if round == 50 {
			t.Fatalf("50 more rounds won only %v races against the slow peer; want 20", counter(t, reg, "latch_cluster_hedges_won_total")-won)
		}
		r, reqs, want := chainData(t, st)
		tc.use(r, s)
		checkAll(t, tc.nodes[1].eng, s, r, reqs, want)
	}
	if up, downs := peerValue(t, reg, "latch_cluster_peer_up", slow), peerValue(t, reg, "latch_cluster_peer_marked_down_total", slow); up != 1 || downs != 0 {
		t.Errorf("after %v races lost to local hedges the slow peer has peer_up %v and was marked down %v times; want up, never down",
			counter(t, reg, "latch_cluster_hedges_won_total"), up, downs)
	}
}

// TestRestartedPeerRejoins kills one node's dispatch service until the others mark
// it down, then starts it again, cold (an empty cache) and slow (every dispatch held a
// second, as a cold node under load answers later than a local hedge), on the same
// address: the health probe takes it back, and after its warm-up it is dispatched to
// again. When the probe was a dispatch raced against the local hedge, such a node lost
// every probe and was never taken back.
func TestRestartedPeerRejoins(t *testing.T) {
	st := memory.New(memory.Options{})
	defer st.Close()
	s := mustCompile(t, chain)
	tc := startClusterWith(t, 3, st, func(_ int, cfg *Config, _ *ServiceOptions) { cfg.WarmUp = 100 * time.Millisecond })
	restarted := tc.nodes[2]
	addr := restarted.lis.Addr().String()
	reg := tc.nodes[0].reg
	restarted.g.Stop()
	for round := 0; peerValue(t, reg, "latch_cluster_peer_up", addr) != 0; round++ {
		if round == 50 {
			t.Fatalf("the stopped peer is still up after 50 rounds")
		}
		r, reqs, want := chainData(t, st)
		tc.use(r, s)
		checkAll(t, tc.nodes[0].eng, s, r, reqs, want)
	}
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	restarted.lis = lis
	tc.serve(restarted, st, ServiceOptions{Delay: time.Second})
	// The probe's wait is at most probeMax; the bound here only keeps a broken
	// prober from hanging the test.
	deadline := time.Now().Add(time.Minute)
	for peerValue(t, reg, "latch_cluster_peer_rejoined_total", addr) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the restarted peer was not taken back within a minute")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if up := peerValue(t, reg, "latch_cluster_peer_up", addr); up != 1 {
		t.Fatalf("rejoined, but peer_up is %v", up)
	}
	if h := counter(t, restarted.reg, "latch_cluster_dispatch_received_total"); h != 0 {
		t.Errorf("the probe is a health call, yet the restarted peer received %v dispatches before it was up", h)
	}
	sent := peerValue(t, reg, "latch_cluster_dispatch_sent_total", addr)
	for round := 0; peerValue(t, reg, "latch_cluster_dispatch_sent_total", addr) == sent; round++ {
		if round == 200 {
			t.Fatal("the rejoined peer was sent no dispatch in 200 rounds")
		}
		r, reqs, want := chainData(t, st)
		tc.use(r, s)
		checkAll(t, tc.nodes[0].eng, s, r, reqs, want)
	}
	if downs := peerValue(t, reg, "latch_cluster_peer_marked_down_total", addr); downs != 1 {
		t.Errorf("the peer was marked down %v times; want once (a cold peer losing races is not marked down again)", downs)
	}
}

// peerValue is the value of the series name{peer=addr}.
func peerValue(t *testing.T, reg *prometheus.Registry, name, addr string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "peer" && l.GetValue() == addr {
					return m.GetCounter().GetValue() + m.GetGauge().GetValue()
				}
			}
		}
	}
	t.Fatalf("no series %s{peer=%q}", name, addr)
	return 0
}

// TestWrongKeyIsRefused: a node with another key is refused by the others' dispatch
// services, and answers everything itself, right.
func TestWrongKeyIsRefused(t *testing.T) {
	st := memory.New(memory.Options{})
	defer st.Close()
	s := mustCompile(t, chain)
	tc := startCluster(t, 2, st)
	tc.nodes[0].c.cfg.PresharedKey = "other"
	for _, p := range tc.nodes[0].c.peers {
		p.conn.Close()
		conn, err := grpc.NewClient(p.addr, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithPerRPCCredentials(bearer{key: "other"}),
			grpc.WithDefaultCallOptions(grpc.ForceCodec(codec{})))
		if err != nil {
			t.Fatal(err)
		}
		p.conn = conn
	}
	r, reqs, want := chainData(t, st)
	tc.use(r, s)
	checkAll(t, tc.nodes[0].eng, s, r, reqs, want)
	if e := counter(t, tc.nodes[1].reg, "latch_cluster_dispatch_received_errors_total"); e == 0 {
		t.Errorf("the node with the right key answered dispatches carrying the wrong one")
	}
}

// TestDispatchOverTLS: nodes serving and dialing over TLS with a private CA dispatch
// to each other; a node that dials without TLS is refused and answers for itself.
func TestDispatchOverTLS(t *testing.T) {
	dir := t.TempDir()
	ca := tlstest.NewCA(t, dir)
	certPath, keyPath := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	ca.Issue(t, certPath, keyPath)
	pair, err := tlsconfig.Load(certPath, keyPath, nil)
	if err != nil {
		t.Fatal(err)
	}
	st := memory.New(memory.Options{})
	defer st.Close()
	s := mustCompile(t, chain)
	tc := startClusterWith(t, 3, st, func(i int, cfg *Config, _ *ServiceOptions) {
		cfg.ServerTLS = pair.Server()
		if i < 2 { // node 2 dials in plaintext
			cfg.ClientTLS = &tls.Config{RootCAs: ca.Pool(), MinVersion: tls.VersionTLS12}
		}
	})
	r, reqs, want := chainData(t, st)
	tc.use(r, s)
	for _, nd := range tc.nodes {
		checkAll(t, nd.eng, s, r, reqs, want)
	}
	for i, nd := range tc.nodes[:2] {
		if f := counter(t, nd.reg, "latch_cluster_dispatch_failed_total"); f != 0 {
			t.Errorf("node %d: %v dispatches over TLS failed", i, f)
		}
		if sent := counter(t, nd.reg, "latch_cluster_dispatch_sent_total"); sent == 0 {
			t.Errorf("node %d sent no dispatches", i)
		}
	}
	if f := counter(t, tc.nodes[2].reg, "latch_cluster_dispatch_failed_total"); f == 0 {
		t.Error("a node dialing TLS peers in plaintext was answered")
	}
}

// TestOwnersSpreadAndStay: rendezvous hashing gives each of 3 members about a third of
// the subproblems, and removing one moves only that member's share.
func TestOwnersSpreadAndStay(t *testing.T) {
	mk := func(addrs ...string) *ring {
		r := &ring{}
		for _, a := range addrs {
			r.members = append(r.members, member{addr: a, hash: memberHash(a), peer: &peer{addr: a}})
		}
		return r
	}
	three, two := mk("a:1", "b:1", "c:1"), mk("a:1", "b:1")
	counts := map[string]int{}
	const n = 30000
	for i := range n {
		h := mix(uint64(i) * 0x9e3779b97f4a7c15)
		owner := three.owner(h).addr
		counts[owner]++
		if owner != "c:1" && two.owner(h).addr != owner {
			t.Fatalf("key %d moved from %s though its owner stayed", i, owner)
		}
	}
	for a, c := range counts {
		if c < n/3-n/20 || c > n/3+n/20 {
			t.Errorf("%s owns %d of %d subproblems; want about a third", a, c, n)
		}
	}
}

// TestDNSMembersFollowTheResolver: a dns:/// cluster takes its members from the
// resolver, finds itself among them, and follows them as they change; a failed lookup
// keeps the members it had.
func TestDNSMembersFollowTheResolver(t *testing.T) {
	var mu sync.Mutex
	ips, fail := []string{"127.0.0.1", "127.0.0.2"}, false
	set := func(next []string, f bool) {
		mu.Lock()
		defer mu.Unlock()
		ips, fail = next, f
	}
	c, err := New(Config{
		Addr: ":7001", Upstream: "dns:///latch.test:7001", PresharedKey: "k", RefreshInterval: 5 * time.Millisecond,
		LookupHost: func(_ context.Context, host string) ([]string, error) {
			mu.Lock()
			defer mu.Unlock()
			if host != "latch.test" || fail {
				return nil, fmt.Errorf("no such host %s", host)
			}
			return slices.Clone(ips), nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got := c.Members(); !slices.Equal(got, []string{"127.0.0.1:7001", "127.0.0.2:7001"}) {
		t.Fatalf("members %v", got)
	}
	if r := c.members.Load(); !r.hasSelf || len(c.peers) != 1 {
		t.Fatalf("self found %v, peers %d: 127.0.0.1 is this machine, 127.0.0.2 a peer", r.hasSelf, len(c.peers))
	}
	waitMembers := func(want ...string) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for !slices.Equal(c.Members(), want) {
			if time.Now().After(deadline) {
				t.Fatalf("members %v, want %v", c.Members(), want)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	set([]string{"127.0.0.1", "127.0.0.3", "127.0.0.4"}, false)
	waitMembers("127.0.0.1:7001", "127.0.0.3:7001", "127.0.0.4:7001")
	set(nil, true)
	time.Sleep(50 * time.Millisecond)
	waitMembers("127.0.0.1:7001", "127.0.0.3:7001", "127.0.0.4:7001")
}

// TestWireRoundTrip: subproblems and answers survive encoding, and damaged messages
// are refused, never misread.
func TestWireRoundTrip(t *testing.T) {
	sp := &engine.Subproblem{
		Revision: 42, ResourceType: "doc", Relation: "view", ResourceIDs: []string{"a", "b", "ü"},
		Subject: rel.SubjectRef{Object: rel.ObjectRef{Type: "group", ID: "eng"}, Relation: "member"},
		Context: []byte(`{"x":1}`), Depth: 7,
	}
	got, err := decodeSubproblem(encodeSubproblem(sp))
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != fmt.Sprint(sp) {
		t.Fatalf("subproblem %+v came back as %+v", sp, got)
	}
	a := &engine.Answers{
		States:  []engine.AnswerState{engine.AnswerNo, engine.AnswerConditional, engine.AnswerMaxDepth},
		Missing: [][]string{nil, {"p", "q"}, nil}, Dispatched: 3, Cached: 9,
	}
	ga, err := decodeAnswers(encodeAnswers(a))
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(ga) != fmt.Sprint(a) {
		t.Fatalf("answers %+v came back as %+v", a, ga)
	}
	// Caveat errors of each kind come back with their message and their kind.
	errs := []*engine.CaveatEvalError{
		{Caveat: "c", Err: &caveat.ParamTypeError{Caveat: "c", Param: "t", Type: "timestamp", Err: errors.New("not RFC 3339")}},
		{Caveat: "c", Err: fmt.Errorf("caveat `c` over 9 items: %w", caveat.ErrCostExceeded)},
		{Caveat: "c", Err: errors.New("no such overload")},
	}
	a = &engine.Answers{
		States:  []engine.AnswerState{engine.AnswerCaveatError, engine.AnswerHas, engine.AnswerCaveatError, engine.AnswerCaveatError},
		Missing: make([][]string, 4), Errors: []*engine.CaveatEvalError{errs[0], nil, errs[1], errs[2]},
	}
	ga, err = decodeAnswers(encodeAnswers(a))
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range a.Errors {
		g := ga.Errors[i]
		if (e == nil) != (g == nil) || e != nil && (g.Caveat != e.Caveat || g.Error() != e.Error() ||
			errors.Is(g, caveat.ErrCostExceeded) != errors.Is(e, caveat.ErrCostExceeded) ||
			errors.As(g, new(*caveat.ParamTypeError)) != errors.As(e, new(*caveat.ParamTypeError))) {
			t.Fatalf("caveat error %d: %#v came back as %#v", i, e, g)
		}
	}
	enc := encodeSubproblem(sp)
	for i := range len(enc) {
		if _, err := decodeSubproblem(enc[:i]); err == nil {
			t.Fatalf("a subproblem cut to %d of %d bytes decoded", i, len(enc))
		}
	}
	if _, err := decodeAnswers([]byte{1, 9}); err == nil {
		t.Fatal("an answer with state 9 decoded")
	}
}

// FuzzDecode feeds the dispatch wire's decoders arbitrary bytes (seeds in
// testdata/fuzz/FuzzDecode: frames, truncated ones, lengths and counts claiming more
// than the frame holds): they never panic, and what they accept encodes back to a
// message that decodes to the same value.
func FuzzDecode(f *testing.F) {
	f.Add([]byte(encodeSubproblem(&engine.Subproblem{ResourceType: "d", Relation: "r", ResourceIDs: []string{"x"}})))
	f.Add([]byte(encodeAnswers(&engine.Answers{States: []engine.AnswerState{engine.AnswerConditional}, Missing: [][]string{{"p"}}})))
	f.Fuzz(func(t *testing.T, b []byte) {
		if sp, err := decodeSubproblem(b); err == nil {
			again, err := decodeSubproblem(encodeSubproblem(sp))
			if err != nil || fmt.Sprintf("%+v", again) != fmt.Sprintf("%+v", sp) {
				t.Fatalf("subproblem %+v re-encoded decodes as %+v, %v", sp, again, err)
			}
		}
		if a, err := decodeAnswers(b); err == nil {
			again, err := decodeAnswers(encodeAnswers(a))
			if err != nil || fmt.Sprintf("%+v", again) != fmt.Sprintf("%+v", a) {
				t.Fatalf("answers %+v re-encoded decode as %+v, %v", a, again, err)
			}
		}
	})
}

// TestBadConfigurationsAreNamed: a configuration that cannot work is refused with the
// flag at fault.
func TestBadConfigurationsAreNamed(t *testing.T) {
	for _, tc := range []struct {
		addr, upstream, want string
	}{
		{"127.0.0.1:7001", "127.0.0.1:7001", "--dispatch-upstream-addr"},
		{"127.0.0.1:7001", "consul:///x:1", "--dispatch-upstream-addr"},
		{"127.0.0.1:7001", "static:///", "--dispatch-upstream-addr"},
		{"127.0.0.1:7001", "static:///127.0.0.1:7002,nohost", "member \"nohost\""},
		{"127.0.0.1:7001", "static:///127.0.0.1:7002,127.0.0.1:7003", "--dispatch-cluster-addr 127.0.0.1:7001 is not among the members"},
		{"7001", "static:///127.0.0.1:7001", "--dispatch-cluster-addr"},
	} {
		c, err := New(Config{Addr: tc.addr, Upstream: tc.upstream, PresharedKey: "k"})
		if err == nil {
			c.Close()
			t.Errorf("%s / %s: accepted", tc.addr, tc.upstream)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s / %s: %v; want it to name %s", tc.addr, tc.upstream, err, tc.want)
		}
	}
}
