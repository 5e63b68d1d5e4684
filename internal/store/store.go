// Package store owns the datastore interfaces every backend implements: MVCC revisions,
// batched filtered reads at a revision, atomic write batches with preconditions, the
// stored schema, the registrations of relationship counters (Counters) and their
// stored form, the optional interfaces a backend may add (Watcher, Replicated), the
// sentinel errors the server maps to API errors, and the checks of a write that read
// the same on every backend (CheckUpdates, CheckPreconditions).
package store

import (
	"context"
	"errors"
	"fmt"
	"iter"

	"github.com/latch-authz/latch/internal/rel"
)

// Revision is a point in the store's history. Revisions grow with every committed
// write; reads at a revision see exactly the writes committed at or before it.
type Revision uint64

var (
	// ErrRevisionGone: the revision is older than the GC window.
	ErrRevisionGone = errors.New("revision is older than the garbage collection window")
	// ErrRevisionInFuture: the revision has not been reached by this store.
	ErrRevisionInFuture = errors.New("revision is newer than the store's head revision")
	// ErrInvalidCursor: a cursor that this store did not issue, or for another filter.
	ErrInvalidCursor = errors.New("invalid cursor")
	// ErrTooManyToDelete: a transactional delete matched more than its limit allows.
	ErrTooManyToDelete = errors.New("too many relationships match the delete filter")
)

// AlreadyExistsError is returned by Write when a CREATE names an existing relationship.
type AlreadyExistsError struct{ Relationship rel.Relationship }

func (e *AlreadyExistsError) Error() string {
	return "could not CREATE relationship `" + rel.String(e.Relationship) + "`, as it already existed. If this is persistent, please switch to TOUCH operations or specify a precondition"
}

// PreconditionFailedError is returned by Write and DeleteByFilter when a precondition
// does not hold; nothing was written.
type PreconditionFailedError struct{ Precondition Precondition }

func (e *PreconditionFailedError) Error() string {
	if e.Precondition.Op == MustMatch {
		return "precondition failed: no relationship matches filter " + e.Precondition.Filter.String()
	}
	return "precondition failed: a relationship matches filter " + e.Precondition.Filter.String()
}

// SubjectFilter narrows the subject side of a Filter. Empty fields match anything.
type SubjectFilter struct {
	Type string
	IDs  []string // any of these ids; empty matches every id
	// Relation, when RelationSet, must equal the subject relation exactly ("" = ellipsis).
	Relation    string
	RelationSet bool
}

// Filter selects relationships. Empty fields match anything; several ids match any of them.
type Filter struct {
	ResourceType     string
	ResourceIDs      []string
	ResourceIDPrefix string
	Relation         string
	Subject          *SubjectFilter
	// IncludeExpired returns relationships whose expiration has passed; reads hide them otherwise.
	IncludeExpired bool
}

// String renders f for error messages.
func (f Filter) String() string { return formatFilter(f) }

// Cursor is an opaque resume position returned with a page of results.
type Cursor string

// QueryOptions bound a read.
type QueryOptions struct {
	Limit int    // 0: no limit
	After Cursor // resume after this position; results are ordered by relationship key
	// Unordered says the caller takes the results in any order and resumes from none of
	// them (After is empty): a store may yield them as it finds them, sparing a sort.
	Unordered bool
}

// Reader answers queries at one revision. Every method is safe for concurrent use.
type Reader interface {
	// Revision is the revision this reader reads at.
	Revision() Revision
	// Query yields the relationships matching f in key order (resource type, resource id,
	// relation, subject type, subject id, subject relation), unless opts.Unordered. It hides expired relationships
	// unless f.IncludeExpired. Each item's Cursor resumes after its relationship;
	// iteration stops at the first error.
	Query(ctx context.Context, f Filter, opts QueryOptions) iter.Seq2[Item, error]
	// Schema returns the schema text in force at this revision ("" when none was written).
	Schema(ctx context.Context) (string, error)
}

// Visitor receives a query's items one at a time; Visit returns false to stop the
// query.
type Visitor interface {
	Visit(Item) bool
}

// Visiting is a Reader that can hand a query's items to a Visitor, which costs none of
// the allocations an iterator's closures do; a check's reads go through it (Each). A
// reader that wraps another and changes its Query must not pass the other's QueryEach
// on (embedding it as a Reader, an interface, hides it), or Each would bypass it.
type Visiting interface {
	QueryEach(ctx context.Context, f Filter, opts QueryOptions, v Visitor) error
}

// Each hands the items of r's query to v, through QueryEach when r has it, and
// returns the query's error.
func Each(ctx context.Context, r Reader, f Filter, opts QueryOptions, v Visitor) error {
	if vr, ok := r.(Visiting); ok {
		return vr.QueryEach(ctx, f, opts, v)
	}
	return eachOfQuery(ctx, r, f, opts, v)
}

// eachOfQuery is Each over r's Query. It is a function of its own because a function
// that ranges over an iterator and returns from its body keeps its results on the
// heap: Each would allocate on every call, visitor or not.
func eachOfQuery(ctx context.Context, r Reader, f Filter, opts QueryOptions, v Visitor) error {
	for item, err := range r.Query(ctx, f, opts) {
		if err != nil {
			return err
		}
		if !v.Visit(item) {
			return nil
		}
	}
	return nil
}

// Iterate is the Query of a reader whose QueryEach does the work: QueryEach's items,
// then its error.
func Iterate(ctx context.Context, r Visiting, f Filter, opts QueryOptions) iter.Seq2[Item, error] {
	return func(yield func(Item, error) bool) {
		if err := r.QueryEach(ctx, f, opts, yieldVisitor(yield)); err != nil {
			yield(Item{}, err)
		}
	}
}

// yieldVisitor hands a query's items to an iterator's consumer.
type yieldVisitor func(Item, error) bool

func (y yieldVisitor) Visit(it Item) bool { return y(it, nil) }

// Item is one query result.
type Item struct {
	Relationship rel.Relationship
	codec        CursorCodec
}

// NewItem is a result of a query whose cursors codec encodes.
func NewItem(r rel.Relationship, codec CursorCodec) Item {
	return Item{Relationship: r, codec: codec}
}

// Cursor returns the cursor that resumes the query after the item. It is encoded when
// asked for: most results, all of a check's, never need one.
func (it Item) Cursor() Cursor { return it.codec.Encode(it.Relationship.Key()) }

// Op is what an Update does.
type Op int

const (
	// Create fails with AlreadyExistsError if the relationship exists.
	Create Op = iota + 1
	// Touch creates or replaces the relationship (its caveat and expiration).
	Touch
	// Delete removes the relationship if it exists.
	Delete
)

// Update is one relationship change in a write batch.
type Update struct {
	Op           Op
	Relationship rel.Relationship
}

// PreconditionOp says whether a filter must or must not match.
type PreconditionOp int

const (
	MustMatch PreconditionOp = iota + 1
	MustNotMatch
)

// Precondition is checked at the write's own revision, in the same transaction.
type Precondition struct {
	Op     PreconditionOp
	Filter Filter
}

// Validator is called inside a write transaction with a reader that sees the state
// the write starts from; an error aborts the write and is returned unchanged.
type Validator func(ctx context.Context, r Reader) error

// Store is a datastore. Every method is safe for concurrent use.
type Store interface {
	// HeadRevision is the newest committed revision.
	HeadRevision(ctx context.Context) (Revision, error)
	// Reader reads at rev. It fails with ErrRevisionGone or ErrRevisionInFuture.
	Reader(ctx context.Context, rev Revision) (Reader, error)
	// Write applies updates atomically after checking preconditions and running validate
	// (which may be nil). On any error nothing is written.
	Write(ctx context.Context, preconditions []Precondition, updates []Update, validate Validator) (Revision, error)
	// DeleteByFilter deletes every relationship matching f, at most limit of them (0: no
	// limit). When more match and partial is false it fails with ErrTooManyToDelete and
	// deletes nothing; when partial is true it deletes limit of them and reports that
	// more remain.
	DeleteByFilter(ctx context.Context, preconditions []Precondition, f Filter, limit int, partial bool) (rev Revision, deleted int, more bool, err error)
	// WriteSchema stores schema text after validate accepts the current state.
	WriteSchema(ctx context.Context, text string, validate Validator) (Revision, error)
	// BulkLoad creates every relationship rels yields as one new revision, taking them
	// as they come rather than holding them all (ImportBulkRelationships). It fails
	// whole, writing nothing, when one already exists or comes twice, when one is
	// invalid, when rels yields an error or when ctx ends.
	BulkLoad(ctx context.Context, rels iter.Seq2[rel.Relationship, error]) (Revision, error)
	// Counters keeps the registrations of relationship counters.
	Counters
	// Close releases the store's resources.
	Close() error
}

// ErrUnavailable: the datastore's server cannot be reached right now (it is down,
// restarting or refusing connections). Nothing was written, or the write is one that
// may be repeated safely (see Idempotent); the request may be retried once the server
// is back, and the store reconnects on its own.
var ErrUnavailable = errors.New("datastore is unavailable")

// ErrCommitUnknown: a write that is not safe to repeat reached its commit, the
// connection was lost there, and the datastore could not be asked afterwards whether
// the commit took effect. The write may have been applied: read before retrying it.
var ErrCommitUnknown = errors.New("the datastore did not confirm whether the write was applied; read before retrying it")

// Idempotent reports whether applying a write twice leaves the same state as applying
// it once, so that a write whose outcome is unknown may simply be sent again: touches
// and deletes without preconditions. A create fails the second time, and a
// precondition may no longer hold after the first.
func Idempotent(preconditions []Precondition, updates []Update) bool {
	if len(preconditions) > 0 {
		return false
	}
	for _, u := range updates {
		if u.Op == Create {
			return false
		}
	}
	return true
}

// DeleteIdempotent is Idempotent for DeleteByFilter: repeated, a delete of every match
// changes nothing more, but one cut short by its limit (partial) deletes the next ones.
func DeleteIdempotent(preconditions []Precondition, limit int, partial bool) bool {
	return len(preconditions) == 0 && (!partial || limit == 0)
}

// OutcomeUnknown is the error for a write whose commit outcome could not be learned:
// ErrUnavailable for an idempotent write, which the client may repeat, and
// ErrCommitUnknown for any other, which it must not repeat blindly.
func OutcomeUnknown(idempotent bool, cause error) error {
	if idempotent {
		return fmt.Errorf("%w: the write may have been applied, and repeating it is safe: %v", ErrUnavailable, cause)
	}
	return fmt.Errorf("%w: %v", ErrCommitUnknown, cause)
}
