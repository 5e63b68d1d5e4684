package crdb

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/store"
	"github.com/latch-authz/latch/internal/store/sqlstore"
)

// Watch follows a core (sinkless) changefeed over the relationship and schema tables,
// starting after revision after. CockroachDB sends each changed row with the commit
// timestamp of its transaction ("updated") and, periodically, resolved timestamps: a
// promise that no change at or below them is still to come. Rows are buffered per
// commit timestamp and a revision is yielded, whole, once a resolved timestamp covers
// it, so revisions come out in order and complete. The changefeed runs on a connection
// of its own; a consumer that stops pulling only leaves rows unread on it.
func (s *Store) Watch(ctx context.Context, after store.Revision, opts store.WatchOptions) iter.Seq2[store.Change, error] {
	return func(yield func(store.Change, error) bool) {
		pos := after
		track := func(c store.Change, err error) bool {
			pos = c.Revision
			return yield(c, err)
		}
		err := s.watch(ctx, pos, opts, track)
		// A broken changefeed connection loses nothing: everything up to pos was
		// yielded whole, so a new changefeed resumes after it.
		for attempt := 1; attempt <= watchRetries && errors.Is(err, store.ErrUnavailable) && ctx.Err() == nil; attempt++ {
			select {
			case <-ctx.Done():
			case <-time.After(time.Duration(attempt) * 100 * time.Millisecond):
			}
			err = s.watch(ctx, pos, opts, track)
		}
		if err != nil {
			yield(store.Change{}, err)
		}
	}
}

// watchRetries is how many times in a row a watch reopens a changefeed whose
// connection failed before it reports the failure.
const watchRetries = 3

func (s *Store) watch(ctx context.Context, after store.Revision, opts store.WatchOptions, yield func(store.Change, error) bool) error {
	head, err := s.HeadRevision(ctx)
	if err != nil {
		return err
	}
	if after > head {
		return store.ErrRevisionInFuture
	}
	if time.Unix(0, DecodeRevision(after).WallNanos).Before(s.opts.Now().Add(-s.opts.GCWindow)) {
		return store.ErrRevisionGone
	}
	conn, err := pgx.ConnectConfig(ctx, s.reads.Config().ConnConfig)
	if err != nil {
		return sqlstore.Classify(ctx, "cockroachdb: connecting for a changefeed", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	rows, err := conn.Query(ctx, ChangefeedSQL(after, resolvedInterval(opts)))
	if err != nil {
		return sqlstore.Classify(ctx, "cockroachdb: starting a changefeed", err)
	}
	defer rows.Close()
	buf := newFeedBuffer(after)
	lastYield := time.Now()
	for rows.Next() {
		var table *string
		var key, value []byte
		if err := rows.Scan(&table, &key, &value); err != nil {
			return fmt.Errorf("cockroachdb: reading the changefeed: %w", err)
		}
		ready, resolved, err := buf.add(table, value)
		if err != nil {
			return err
		}
		for _, c := range ready {
			if !yield(c, nil) {
				return nil
			}
			lastYield = time.Now()
		}
		if resolved != 0 && opts.CheckpointInterval > 0 && time.Since(lastYield) >= opts.CheckpointInterval {
			if !yield(store.Change{Revision: resolved, Checkpoint: true}, nil) {
				return nil
			}
			lastYield = time.Now()
		}
	}
	if err := rows.Err(); err != nil {
		return sqlstore.Classify(ctx, "cockroachdb: following the changefeed", err)
	}
	return ctx.Err()
}

// resolvedInterval is how often CockroachDB sends resolved timestamps: often enough
// for the checkpoints asked for, and at most a second, which bounds how long a commit
// waits in the buffer.
func resolvedInterval(opts store.WatchOptions) time.Duration {
	if opts.CheckpointInterval > 0 {
		return min(opts.CheckpointInterval, time.Second)
	}
	return time.Second
}

// ChangefeedSQL is the core changefeed a watch reads: every change to the relationship
// and schema tables after rev, with the row before each change (diff), its commit
// timestamp (updated) and resolved timestamps every interval. The cursor and the
// interval are made of digits and units only, so they cannot inject anything.
func ChangefeedSQL(after store.Revision, resolved time.Duration) string {
	return fmt.Sprintf("EXPERIMENTAL CHANGEFEED FOR latch_relationships, latch_schema WITH updated, diff, resolved = '%dms', cursor = '%s'",
		max(resolved.Milliseconds(), 1), DecodeRevision(after).String())
}

// feedMessage is a changefeed row's value in CockroachDB's wrapped envelope.
type feedMessage struct {
	After    json.RawMessage `json:"after"`
	Before   json.RawMessage `json:"before"`
	Updated  string          `json:"updated"`
	Resolved string          `json:"resolved"`
}

// feedRow is a latch_relationships row as a changefeed renders it in JSON.
type feedRow struct {
	ResourceType    string          `json:"resource_type"`
	ResourceID      string          `json:"resource_id"`
	Relation        string          `json:"relation"`
	SubjectType     string          `json:"subject_type"`
	SubjectID       string          `json:"subject_id"`
	SubjectRelation string          `json:"subject_relation"`
	CaveatName      *string         `json:"caveat_name"`
	CaveatContext   json.RawMessage `json:"caveat_context"`
	Expiration      *string         `json:"expiration"`
}

func (f feedRow) relationship() (rel.Relationship, error) {
	r := rel.Relationship{
		Resource: rel.ObjectRef{Type: f.ResourceType, ID: f.ResourceID},
		Relation: f.Relation,
		Subject:  rel.SubjectRef{Object: rel.ObjectRef{Type: f.SubjectType, ID: f.SubjectID}, Relation: f.SubjectRelation},
	}
	if f.CaveatName != nil {
		r.Caveat = &rel.Caveat{Name: *f.CaveatName}
		if len(f.CaveatContext) > 0 && string(f.CaveatContext) != "null" {
			if err := json.Unmarshal(f.CaveatContext, &r.Caveat.Context); err != nil {
				return r, fmt.Errorf("caveat context of %s is not a JSON object: %w", rel.String(r), err)
			}
		}
	}
	if f.Expiration != nil {
		t, err := time.Parse(time.RFC3339Nano, *f.Expiration)
		if err != nil {
			return r, fmt.Errorf("expiration %q of %s: %w", *f.Expiration, rel.String(r), err)
		}
		t = t.UTC()
		r.Expiration = &t
	}
	return r, nil
}

// feedBuffer holds changefeed rows by revision until a resolved timestamp releases them.
type feedBuffer struct {
	pending map[store.Revision]*pendingRevision
	// floor is the highest revision already settled (the cursor, then each resolved
	// timestamp). Changefeeds deliver at least once, so a row at or below it is a
	// duplicate of one already released and is dropped.
	floor store.Revision
}

type pendingRevision struct {
	schema  bool
	updates map[rel.Key]store.RelationshipChange
}

func newFeedBuffer(after store.Revision) *feedBuffer {
	return &feedBuffer{pending: map[store.Revision]*pendingRevision{}, floor: after}
}

// add takes one changefeed row (table is nil for resolved messages). It returns the
// revisions a resolved timestamp completed, in order, and that resolved revision (0
// for a data row).
func (b *feedBuffer) add(table *string, value []byte) ([]store.Change, store.Revision, error) {
	var m feedMessage
	if err := json.Unmarshal(value, &m); err != nil {
		return nil, 0, fmt.Errorf("cockroachdb: changefeed message %q is not JSON: %w", clipBytes(value), err)
	}
	if m.Resolved != "" {
		rev, err := revisionOf(m.Resolved)
		if err != nil {
			return nil, 0, err
		}
		if rev <= b.floor {
			return nil, 0, nil
		}
		b.floor = rev
		return b.release(rev), rev, nil
	}
	if table == nil || m.Updated == "" {
		return nil, 0, fmt.Errorf("cockroachdb: changefeed row %q has no table or no updated timestamp", clipBytes(value))
	}
	rev, err := revisionOf(m.Updated)
	if err != nil {
		return nil, 0, err
	}
	if rev <= b.floor {
		return nil, 0, nil
	}
	p := b.pending[rev]
	if p == nil {
		p = &pendingRevision{updates: map[rel.Key]store.RelationshipChange{}}
		b.pending[rev] = p
	}
	switch *table {
	case "latch_schema":
		p.schema = true
	case "latch_relationships":
		op, raw := store.ChangeTouch, m.After
		if len(raw) == 0 || string(raw) == "null" {
			op, raw = store.ChangeDelete, m.Before
		}
		var row feedRow
		if err := json.Unmarshal(raw, &row); err != nil {
			return nil, 0, fmt.Errorf("cockroachdb: changefeed row %q: %w", clipBytes(value), err)
		}
		r, err := row.relationship()
		if err != nil {
			return nil, 0, err
		}
		p.updates[r.Key()] = store.RelationshipChange{Op: op, Relationship: r}
	default:
		return nil, 0, fmt.Errorf("cockroachdb: changefeed row from unexpected table %q", *table)
	}
	return nil, 0, nil
}

// release returns, in revision order, every buffered revision at or below resolved.
func (b *feedBuffer) release(resolved store.Revision) []store.Change {
	var revs []store.Revision
	for rev := range b.pending {
		if rev <= resolved {
			revs = append(revs, rev)
		}
	}
	slices.Sort(revs)
	out := make([]store.Change, 0, len(revs))
	for _, rev := range revs {
		p := b.pending[rev]
		delete(b.pending, rev)
		c := store.Change{Revision: rev, SchemaChanged: p.schema}
		for _, u := range p.updates {
			c.Updates = append(c.Updates, u)
		}
		slices.SortFunc(c.Updates, func(x, y store.RelationshipChange) int {
			return store.CompareKeys(x.Relationship.Key(), y.Relationship.Key())
		})
		out = append(out, c)
	}
	return out
}

func revisionOf(hlc string) (store.Revision, error) {
	h, err := ParseHLC(hlc)
	if err != nil {
		return 0, fmt.Errorf("cockroachdb: changefeed timestamp: %w", err)
	}
	return EncodeRevision(h)
}

func clipBytes(b []byte) string {
	const n = 200
	if len(b) > n {
		return string(b[:n]) + "…"
	}
	return string(b)
}
