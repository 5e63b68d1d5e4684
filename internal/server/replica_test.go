package server

import (
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "github.com/authzed/authzed-go/proto/authzed/api/v1"

	"github.com/latch-authz/latch/internal/store/postgres"
	"github.com/latch-authz/latch/internal/store/postgres/pgtest"
)

// readsServed scrapes latch_datastore_reads_total from /metrics: the pages read from
// the primary and from replicas.
func readsServed(t *testing.T, addr string) (primary, replica float64) {
	t.Helper()
	found := 0
	for line := range strings.Lines(scrape(t, addr)) {
		name, value, ok := strings.Cut(strings.TrimSpace(line), " ")
		if !ok {
			continue
		}
		var dst *float64
		switch name {
		case `latch_datastore_reads_total{target="primary"}`:
			dst = &primary
		case `latch_datastore_reads_total{target="replica"}`:
			dst = &replica
		default:
			continue
		}
		n, err := strconv.ParseFloat(value, 64)
		if err != nil {
			t.Fatalf("/metrics: %q: %v", line, err)
		}
		*dst = n
		found++
	}
	if found != 2 {
		t.Fatal("/metrics lacks latch_datastore_reads_total for the primary and the replica")
	}
	return primary, replica
}

// TestReplicaReads runs the server on PostgreSQL with a streaming replica whose replay
// is paused to make it lag on purpose: a read at a fresh write's token is answered by
// the primary, never by the lagging replica; minimize_latency reads an older revision
// from the replica; fully_consistent reads go to the primary even when the replica has
// caught up; and once replay resumes, at_least_as_fresh reads go to the replica again.
func TestReplicaReads(t *testing.T) {
	primary, replica := pgtest.StartWithReplica(t)
	uri := primary.NewDatabase(t, "latch_migrated", postgres.Migrate)
	db := pgtest.Database(uri)
	ts := start(t, func(c *Config) {
		c.DatastoreEngine, c.DatastoreURI, c.ReplicaURIs = "postgres", uri, []string{replica.URI(db)}
		c.MetricsAddr = "127.0.0.1:0"
		// No cache, so that every check reads; one window for the whole test, so that
		// minimize_latency keeps reading the revision it first read.
		c.DispatchCacheMaxBytes, c.QuantizationWindow, c.MaxStalenessPercent = -1, 100000*time.Hour, -1
	})
	addr := ts.srv.MetricsAddr()
	ts.writeSchema(t, docSchema)
	ts.write(t, relationship("document", "readme", "owner", "user", "zed", ""))
	doc, alice := obj("document", "readme"), sub("user", "alice", "")
	atLeast := func(tok *v1.ZedToken) *v1.Consistency {
		return &v1.Consistency{Requirement: &v1.Consistency_AtLeastAsFresh{AtLeastAsFresh: tok}}
	}
	minimizeLatency := &v1.Consistency{Requirement: &v1.Consistency_MinimizeLatency{MinimizeLatency: true}}
	// expect checks alice's view with c, wants the answer want, and reports which of the
	// primary and the replica served the check's reads.
	expect := func(c *v1.Consistency, want v1.CheckPermissionResponse_Permissionship) (byPrimary, byReplica bool) {
		t.Helper()
		p0, r0 := readsServed(t, addr)
		resp, err := ts.check(t, c, doc, "view", alice)
		if err != nil || resp.GetPermissionship() != want {
			t.Fatalf("check with %v: %v, %v; want %v", c, resp.GetPermissionship(), err, want)
		}
		p1, r1 := readsServed(t, addr)
		return p1 > p0, r1 > r0
	}
	// untilReplica checks with c until the replica serves the check.
	untilReplica := func(c *v1.Consistency, want v1.CheckPermissionResponse_Permissionship, why string) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			if _, byReplica := expect(c, want); byReplica {
				return
			}
			if time.Now().After(deadline) {
				t.Fatal(why)
			}
		}
	}
	none, has := v1.CheckPermissionResponse_PERMISSIONSHIP_NO_PERMISSION, v1.CheckPermissionResponse_PERMISSIONSHIP_HAS_PERMISSION

	untilReplica(minimizeLatency, none, "the replica never served a minimize_latency read")
	if err := replica.Exec(ctxT(t), db, "SELECT pg_wal_replay_pause()"); err != nil {
		t.Fatal(err)
	}
	granted := ts.write(t, relationship("document", "readme", "viewer", "user", "alice", ""))
	// Several reads, past the store's interval between asking a lagging replica again.
	for range 3 {
		if byPrimary, byReplica := expect(atLeast(granted), has); byReplica || !byPrimary {
			t.Fatalf("a read at a fresh token: by the primary %v, by the lagging replica %v", byPrimary, byReplica)
		}
		if byPrimary, byReplica := expect(fullyConsistent(), has); byReplica || !byPrimary {
			t.Fatalf("a fully_consistent read: by the primary %v, by the lagging replica %v", byPrimary, byReplica)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// minimize_latency still reads the window's revision, from before the grant, which
	// the replica has.
	if _, byReplica := expect(minimizeLatency, none); !byReplica {
		t.Fatal("the replica did not serve a minimize_latency read at a revision it has replayed")
	}

	if err := replica.Exec(ctxT(t), db, "SELECT pg_wal_replay_resume()"); err != nil {
		t.Fatal(err)
	}
	untilReplica(atLeast(granted), has, "the resumed replica never served a read at the fresh token")
	if byPrimary, byReplica := expect(fullyConsistent(), has); byReplica || !byPrimary {
		t.Fatalf("a fully_consistent read with the replica caught up: by the primary %v, by the replica %v", byPrimary, byReplica)
	}
}
