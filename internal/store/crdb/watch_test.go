package crdb

import (
	"strings"
	"testing"

	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/store"
)

// Changefeed messages in CockroachDB's wrapped envelope with `updated` and `diff`, as
// a core changefeed sends them: data rows carry the table, resolved messages none.
var (
	relTable    = "latch_relationships"
	schemaTable = "latch_schema"
)

func mustRev(t *testing.T, hlc string) store.Revision {
	t.Helper()
	rev, err := revisionOf(hlc)
	if err != nil {
		t.Fatal(err)
	}
	return rev
}

func TestFeedBufferReleasesWholeRevisionsInOrder(t *testing.T) {
	b := newFeedBuffer(0)
	rows := []struct {
		table *string
		value string
	}{
		{&relTable, `{"after": {"resource_type": "doc", "resource_id": "2", "relation": "viewer", "subject_type": "user", "subject_id": "b", "subject_relation": "", "caveat_name": null, "caveat_context": null, "expiration": null}, "before": null, "updated": "1800000000000000002.0000000000"}`},
		{&relTable, `{"after": {"resource_type": "doc", "resource_id": "1", "relation": "viewer", "subject_type": "user", "subject_id": "a", "subject_relation": "", "caveat_name": "only", "caveat_context": {"x": 1}, "expiration": "2030-01-02T03:04:05+00:00"}, "before": null, "updated": "1800000000000000001.0000000000"}`},
		{&relTable, `{"after": null, "before": {"resource_type": "doc", "resource_id": "0", "relation": "viewer", "subject_type": "team", "subject_id": "t", "subject_relation": "member", "caveat_name": null, "caveat_context": null, "expiration": null}, "updated": "1800000000000000002.0000000000"}`},
		{&schemaTable, `{"after": {"singleton": true, "text": "definition user {}"}, "before": null, "updated": "1800000000000000003.0000000000"}`},
	}
	for _, r := range rows {
		ready, resolved, err := b.add(r.table, []byte(r.value))
		if err != nil || len(ready) != 0 || resolved != 0 {
			t.Fatalf("data row released %v, %d, %v", ready, resolved, err)
		}
	}
	ready, resolved, err := b.add(nil, []byte(`{"resolved": "1800000000000000002.0000000000"}`))
	if err != nil {
		t.Fatal(err)
	}
	if resolved != mustRev(t, "1800000000000000002.0000000000") || len(ready) != 2 {
		t.Fatalf("resolved %d released %d revisions", resolved, len(ready))
	}
	first, second := ready[0], ready[1]
	if first.Revision != mustRev(t, "1800000000000000001.0000000000") || len(first.Updates) != 1 ||
		rel.String(first.Updates[0].Relationship) != `doc:1#viewer@user:a[only:{"x":1}][expiration:2030-01-02T03:04:05Z]` || first.Updates[0].Op != store.ChangeTouch {
		t.Errorf("first revision %+v", first)
	}
	if len(second.Updates) != 2 || second.Updates[0].Op != store.ChangeDelete || rel.String(second.Updates[0].Relationship) != "doc:0#viewer@team:t#member" ||
		second.Updates[1].Op != store.ChangeTouch || second.SchemaChanged {
		t.Errorf("second revision %+v", second)
	}
	ready, _, err = b.add(nil, []byte(`{"resolved": "1800000000000000009.0000000000"}`))
	if err != nil || len(ready) != 1 || !ready[0].SchemaChanged || len(ready[0].Updates) != 0 {
		t.Errorf("schema revision: %+v, %v", ready, err)
	}
	if len(b.pending) != 0 {
		t.Errorf("%d revisions left buffered", len(b.pending))
	}
}

func TestFeedBufferRejectsMalformedRows(t *testing.T) {
	other := "elsewhere"
	for _, tc := range []struct {
		table       *string
		value, want string
	}{
		{&relTable, `not json`, "not JSON"},
		{&relTable, `{"after": {}}`, "no updated timestamp"},
		{nil, `{"after": {}, "updated": "1800000000000000001.0000000000"}`, "no table"},
		{&other, `{"after": {}, "updated": "1800000000000000001.0000000000"}`, "unexpected table"},
		{nil, `{"resolved": "yesterday"}`, "timestamp"},
		{&relTable, `{"after": {"resource_type": "doc", "caveat_name": "c", "caveat_context": [1]}, "updated": "1800000000000000001.0000000000"}`, "not a JSON object"},
		{&relTable, `{"after": {"resource_type": "doc", "expiration": "soon"}, "updated": "1800000000000000001.0000000000"}`, "expiration"},
	} {
		_, _, err := newFeedBuffer(0).add(tc.table, []byte(tc.value))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error mentioning %q", tc.value, err, tc.want)
		}
	}
}

func TestFeedBufferDropsRedeliveredRows(t *testing.T) {
	b := newFeedBuffer(mustRev(t, "1800000000000000001.0000000000"))
	row := func(updated string) []byte {
		return []byte(`{"after": {"resource_type": "doc", "resource_id": "1", "relation": "viewer", "subject_type": "user", "subject_id": "a", "subject_relation": ""}, "before": null, "updated": "` + updated + `"}`)
	}
	for _, v := range [][]byte{row("1800000000000000001.0000000000"), row("1800000000000000002.0000000000")} {
		if _, _, err := b.add(&relTable, v); err != nil {
			t.Fatal(err)
		}
	}
	ready, _, err := b.add(nil, []byte(`{"resolved": "1800000000000000005.0000000000"}`))
	if err != nil || len(ready) != 1 || ready[0].Revision != mustRev(t, "1800000000000000002.0000000000") {
		t.Fatalf("released %+v, %v; want only the revision after the cursor", ready, err)
	}
	// A redelivery of the released revision and a stale resolved timestamp change nothing.
	if _, _, err := b.add(&relTable, row("1800000000000000002.0000000000")); err != nil {
		t.Fatal(err)
	}
	ready, resolved, err := b.add(nil, []byte(`{"resolved": "1800000000000000004.0000000000"}`))
	if err != nil || len(ready) != 0 || resolved != 0 || len(b.pending) != 0 {
		t.Errorf("redelivery released %+v at %d (%v), %d pending", ready, resolved, err, len(b.pending))
	}
}
