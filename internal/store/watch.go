package store

import (
	"context"
	"errors"
	"iter"
	"time"

	"github.com/latch-authz/latch/internal/rel"
)

// ChangeOp says what a committed revision did to one relationship.
type ChangeOp int

const (
	// ChangeTouch: the relationship was created, or its caveat or expiration replaced.
	// Creates are reported as touches (as SpiceDB's watch does): a watcher cannot tell
	// them apart and does not need to.
	ChangeTouch ChangeOp = iota + 1
	// ChangeDelete: the relationship was removed (explicitly or by a filtered delete).
	ChangeDelete
)

func (op ChangeOp) String() string {
	switch op {
	case ChangeTouch:
		return "TOUCH"
	case ChangeDelete:
		return "DELETE"
	}
	return "UNKNOWN"
}

// RelationshipChange is one relationship a revision changed. For a touch, Relationship
// is the version written; for a delete, the version removed (with its caveat and
// expiration).
type RelationshipChange struct {
	Op           ChangeOp
	Relationship rel.Relationship
}

// Change is what one revision committed, or a checkpoint.
//
// A non-checkpoint Change lists every relationship whose stored state the revision
// changed, at most once each, in key order (store.CompareKeys), and whether it
// replaced the schema. Revisions that changed nothing (a delete of an absent
// relationship, an empty write) are skipped. A touch that leaves a relationship
// exactly as it was may or may not be reported, depending on the backend.
//
// A checkpoint (Checkpoint true, no updates) says that every change at or below
// Revision has been delivered: a watcher may record Revision as its resume position.
type Change struct {
	Revision      Revision
	Updates       []RelationshipChange
	SchemaChanged bool
	Checkpoint    bool
}

// WatchOptions tune a watch.
type WatchOptions struct {
	// CheckpointInterval: when no change has been delivered for this long and the
	// watch has caught up with the head, it yields a checkpoint at the head. Zero
	// turns checkpoints off.
	CheckpointInterval time.Duration
}

// Watcher is the optional interface of stores that can stream their committed changes
// (discover it with a type assertion).
//
// Watch yields, in revision order and each exactly once, the changes committed after
// revision after, then follows new commits until ctx ends or the consumer stops. A
// revision is yielded only once every earlier revision has been. The iteration ends
// with one error: ErrRevisionGone when after (or the watch's position, had it paused)
// is older than the GC window, ErrRevisionInFuture when after is past the head, or
// ctx's error. The iterator is pull-based: it does its work in the consumer's
// goroutine, so a consumer that stops pulling costs writers nothing; when it pulls
// again it resumes where it stopped (from the store's history if its in-memory feed
// has moved on).
type Watcher interface {
	Watch(ctx context.Context, after Revision, opts WatchOptions) iter.Seq2[Change, error]
}

// ErrWatchLagging: a watcher did not take the changes sent to it as fast as they were
// committed and its bounded buffer overflowed. Nothing was lost: the watch can resume
// from the last revision it received.
var ErrWatchLagging = errors.New("watcher fell too far behind the committed changes; resume from the last revision received")
