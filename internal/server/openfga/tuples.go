package openfga

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	openfgav1 "github.com/openfga/api/proto/openfga/v1"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/latch-authz/latch/internal/fga"
	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/store"
)

// OpenFGA reports when each change was made (ReadChanges, and Read's tuples); latch's
// revisions carry no time. Every Write therefore also touches the store's clock, one
// relationship of a type no model has whose caveat context is the write's time: the
// change a revision commits carries its own time, in the same transaction, and the
// store keeps one such relationship, not one per write.
var clockKey = rel.Relationship{
	Resource: rel.ObjectRef{Type: clockType, ID: "writes"}, Relation: "at",
	Subject: rel.SubjectRef{Object: rel.ObjectRef{Type: clockType, ID: "writes"}},
}

const clockType = "latch_openfga_clock"

func clockAt(t time.Time) rel.Relationship {
	c := clockKey
	c.Caveat = &rel.Caveat{Name: "at", Context: map[string]any{"t": t.UTC().Format(time.RFC3339Nano)}}
	return c
}

// clockTime reads a clock relationship's time (zero for any other).
func clockTime(r rel.Relationship) time.Time {
	if r.Resource.Type != clockType || r.Caveat == nil {
		return time.Time{}
	}
	s, _ := r.Caveat.Context["t"].(string)
	t, _ := time.Parse(time.RFC3339Nano, s)
	return t
}

// Write applies writes and deletes in one transaction: all or nothing.
func (s *Service) Write(ctx context.Context, req *openfgav1.WriteRequest) (*openfgav1.WriteResponse, error) {
	if err := validated(req); err != nil {
		return nil, err
	}
	writes, deletes := req.GetWrites().GetTupleKeys(), req.GetDeletes().GetTupleKeys()
	if len(writes)+len(deletes) == 0 {
		return nil, fgaError(openfgav1.ErrorCode_invalid_write_input, "Invalid input. Make sure you provide at least one write, or at least one delete")
	}
	if n := len(writes) + len(deletes); n > s.cfg.MaxTuplesPerWrite {
		return nil, fgaError(openfgav1.ErrorCode_exceeded_entity_limit, "The number of write operations exceeds the allowed limit of %d", s.cfg.MaxTuplesPerWrite)
	}
	ignoreDup, err := onMode(req.GetWrites().GetOnDuplicate(), "on_duplicate")
	if err != nil {
		return nil, err
	}
	ignoreMissing, err := onMode(req.GetDeletes().GetOnMissing(), "on_missing")
	if err != nil {
		return nil, err
	}
	st, err := s.store(req.GetStoreId())
	if err != nil {
		return nil, err
	}
	cm, err := st.modelFor(ctx, req.GetAuthorizationModelId())
	if err != nil {
		return nil, err
	}
	w, err := planWrite(cm.model, writes, deletes)
	if err != nil {
		return nil, err
	}
	// A duplicate that OpenFGA ignores is one already stored exactly so: they are
	// dropped before the write, which creates the rest (failing whole if one came in
	// between) and may retry once.
	for attempt := 0; ; attempt++ {
		updates, pre, err := w.updates(ctx, st, ignoreDup, ignoreMissing)
		if err != nil {
			return nil, err
		}
		_, err = st.data.Write(ctx, pre, updates, nil)
		if err == nil {
			return &openfgav1.WriteResponse{}, nil
		}
		if ae, ok := errors.AsType[*store.AlreadyExistsError](err); ok {
			if ignoreDup && attempt == 0 {
				continue
			}
			return nil, writeConflict("cannot write a tuple which already exists", w.keyOf(ae.Relationship))
		}
		if pe, ok := errors.AsType[*store.PreconditionFailedError](err); ok {
			return nil, writeConflict("cannot delete a tuple which does not exist", w.keyOfFilter(pe.Precondition.Filter))
		}
		return nil, storeError(err)
	}
}

// onMode reads on_duplicate / on_missing: "" and "error" refuse, "ignore" ignores.
func onMode(v, field string) (bool, error) {
	switch v {
	case "", "error":
		return false, nil
	case "ignore":
		return true, nil
	}
	return false, validationError("invalid %s %q: it is error or ignore", field, v)
}

func writeConflict(what string, tk *openfgav1.TupleKey) error {
	return fgaError(openfgav1.ErrorCode_write_failed_due_to_invalid_input,
		"%s: user: '%s', relation: '%s', object: '%s': invalid write input", what, tk.GetUser(), tk.GetRelation(), tk.GetObject())
}

// plannedWrite is a Write's tuples, translated and checked.
type plannedWrite struct {
	writes, deletes []rel.Relationship
	keys            map[rel.Key]*openfgav1.TupleKey // each tuple as the client sent it
}

func planWrite(model *fga.Model, writes []*openfgav1.TupleKey, deletes []*openfgav1.TupleKeyWithoutCondition) (*plannedWrite, error) {
	w := &plannedWrite{keys: make(map[rel.Key]*openfgav1.TupleKey, len(writes)+len(deletes))}
	add := func(tk *openfgav1.TupleKey) (rel.Relationship, error) {
		r, err := model.Relationship(tk)
		if err != nil {
			return rel.Relationship{}, tupleError(err)
		}
		if _, dup := w.keys[r.Key()]; dup {
			return rel.Relationship{}, fgaError(openfgav1.ErrorCode_cannot_allow_duplicate_tuples_in_one_request,
				"duplicate tuple in write: user: '%s', relation: '%s', object: '%s'", tk.GetUser(), tk.GetRelation(), tk.GetObject())
		}
		w.keys[r.Key()] = tk
		return r, nil
	}
	for _, tk := range writes {
		r, err := add(tk)
		if err != nil {
			return nil, err
		}
		w.writes = append(w.writes, r)
	}
	for _, d := range deletes {
		r, err := add(&openfgav1.TupleKey{User: d.GetUser(), Relation: d.GetRelation(), Object: d.GetObject()})
		if err != nil {
			return nil, err
		}
		w.deletes = append(w.deletes, r)
	}
	return w, nil
}

// updates is the write's batch: creates of the writes not already stored exactly so
// (when duplicates are ignored), deletes that must match unless missing ones are
// ignored, and the clock.
func (w *plannedWrite) updates(ctx context.Context, st *fgaStore, ignoreDup, ignoreMissing bool) ([]store.Update, []store.Precondition, error) {
	var stored map[rel.Key]rel.Relationship
	if ignoreDup && len(w.writes) > 0 {
		var err error
		if stored, err = st.existing(ctx, w.writes); err != nil {
			return nil, nil, err
		}
	}
	updates := make([]store.Update, 0, len(w.writes)+len(w.deletes)+1)
	for _, r := range w.writes {
		if old, ok := stored[r.Key()]; ok {
			if sameCondition(old, r) {
				continue
			}
			return nil, nil, writeConflict("cannot write a tuple which already exists with a different condition", w.keyOf(r))
		}
		updates = append(updates, store.Update{Op: store.Create, Relationship: r})
	}
	var pre []store.Precondition
	for _, r := range w.deletes {
		updates = append(updates, store.Update{Op: store.Delete, Relationship: r})
		if !ignoreMissing {
			pre = append(pre, store.Precondition{Op: store.MustMatch, Filter: exactFilter(r)})
		}
	}
	updates = append(updates, store.Update{Op: store.Touch, Relationship: clockAt(time.Now())})
	return updates, pre, nil
}

func (w *plannedWrite) keyOf(r rel.Relationship) *openfgav1.TupleKey { return w.keys[r.Key()] }

func (w *plannedWrite) keyOfFilter(f store.Filter) *openfgav1.TupleKey {
	for _, r := range w.deletes {
		if exactMatch(f, r) {
			return w.keys[r.Key()]
		}
	}
	return &openfgav1.TupleKey{}
}

func exactFilter(r rel.Relationship) store.Filter {
	return store.Filter{
		ResourceType: r.Resource.Type, ResourceIDs: []string{r.Resource.ID}, Relation: r.Relation,
		Subject: &store.SubjectFilter{Type: r.Subject.Object.Type, IDs: []string{r.Subject.Object.ID}, Relation: r.Subject.Relation, RelationSet: true},
	}
}

func exactMatch(f store.Filter, r rel.Relationship) bool {
	return f.Matches(r, time.Time{})
}

func sameCondition(a, b rel.Relationship) bool {
	if (a.Caveat == nil) != (b.Caveat == nil) {
		return false
	}
	return a.Caveat == nil || (a.Caveat.Name == b.Caveat.Name && fmt.Sprint(a.Caveat.Context) == fmt.Sprint(b.Caveat.Context))
}

// existing returns the stored versions of rels, at the head.
func (st *fgaStore) existing(ctx context.Context, rels []rel.Relationship) (map[rel.Key]rel.Relationship, error) {
	r, err := st.head(ctx)
	if err != nil {
		return nil, err
	}
	out := map[rel.Key]rel.Relationship{}
	for _, x := range rels {
		for item, err := range r.Query(ctx, exactFilter(x), store.QueryOptions{Limit: 1}) {
			if err != nil {
				return nil, storeError(err)
			}
			out[x.Key()] = item.Relationship
		}
	}
	return out, nil
}

// lastWrite is the time of the newest write r sees (zero before the first).
func lastWrite(ctx context.Context, r store.Reader) (time.Time, error) {
	for item, err := range r.Query(ctx, exactFilter(clockKey), store.QueryOptions{Limit: 1}) {
		if err != nil {
			return time.Time{}, storeError(err)
		}
		return clockTime(item.Relationship), nil
	}
	return time.Time{}, nil
}

// Read lists the tuples matching a filter, a page at a time. A tuple's timestamp is
// the time of the store's newest write at the read's revision: latch keeps no time
// per tuple, and a tuple was written at or before it.
func (s *Service) Read(ctx context.Context, req *openfgav1.ReadRequest) (*openfgav1.ReadResponse, error) {
	if err := validated(req); err != nil {
		return nil, err
	}
	size, err := pageSize(req.GetPageSize())
	if err != nil {
		return nil, err
	}
	after, err := decodeToken(req.GetContinuationToken(), "read")
	if err != nil {
		return nil, err
	}
	st, err := s.store(req.GetStoreId())
	if err != nil {
		return nil, err
	}
	f, match, err := readFilter(req.GetTupleKey())
	if err != nil {
		return nil, err
	}
	r, err := st.reader(ctx, req.GetConsistency())
	if err != nil {
		return nil, err
	}
	at, err := lastWrite(ctx, r)
	if err != nil {
		return nil, err
	}
	ts := timestamppb.New(at)
	out := &openfgav1.ReadResponse{}
	for item, err := range r.Query(ctx, f, store.QueryOptions{After: store.Cursor(after)}) {
		if err != nil {
			if errors.Is(err, store.ErrInvalidCursor) {
				return nil, invalidContinuationToken()
			}
			return nil, storeError(err)
		}
		if item.Relationship.Resource.Type == clockType {
			continue
		}
		tk := fga.TupleKey(item.Relationship)
		if tk == nil || !match(tk) {
			continue
		}
		if len(out.Tuples) == size {
			out.ContinuationToken = encodeToken("read", after)
			break
		}
		out.Tuples = append(out.Tuples, &openfgav1.Tuple{Key: tk, Timestamp: ts})
		after = string(item.Cursor())
	}
	return out, nil
}

// readFilter is the store filter of a Read's tuple key, and what the tuples it
// yields must match besides: the object's type (and id), then user and relation as
// OpenFGA spells them.
func readFilter(k *openfgav1.ReadRequestTupleKey) (store.Filter, func(*openfgav1.TupleKey) bool, error) {
	if k == nil || (k.GetObject() == "" && k.GetUser() == "" && k.GetRelation() == "") {
		return store.Filter{}, func(tk *openfgav1.TupleKey) bool { return true }, nil
	}
	typ, id, ok := cutObject(k.GetObject())
	if !ok {
		return store.Filter{}, nil, validationError("the 'object' field must be 'type:id' or 'type:', got '%s'", k.GetObject())
	}
	if id == "" && k.GetUser() == "" {
		return store.Filter{}, nil, validationError("the 'user' field is required when the object is of the form 'type:'")
	}
	f := store.Filter{ResourceType: typ}
	if id != "" {
		f.ResourceIDs = []string{id}
	}
	return f, func(tk *openfgav1.TupleKey) bool {
		return (k.GetRelation() == "" || tk.GetRelation() == k.GetRelation()) && userMatches(k.GetUser(), tk.GetUser())
	}, nil
}

// userMatches says whether a Read's user filter ("type:id", "type:id#rel", or
// "type:" for every user of a type) matches a tuple's user.
func userMatches(filter, user string) bool {
	if filter == "" || filter == user {
		return true
	}
	typ, id, ok := cutObject(filter)
	if !ok || id != "" {
		return false
	}
	utyp, _, _ := cutObject(user)
	return utyp == typ
}

// cutObject splits "type:id"; ok is false when there is no colon or no type.
func cutObject(s string) (typ, id string, ok bool) {
	for i := 0; i < len(s); i++ {
		if s[i] == ':' {
			return s[:i], s[i+1:], i > 0
		}
	}
	return "", "", false
}

// maxChangesScanned bounds the revisions one ReadChanges call walks when a type
// filter skips them all, so a call ends; its token resumes after them.
const maxChangesScanned = 10_000

// ReadChanges lists the tuple changes after a continuation token (a revision), or
// from start_time, oldest first. The history is the datastore's, kept for its GC
// window (--datastore-gc-window).
func (s *Service) ReadChanges(ctx context.Context, req *openfgav1.ReadChangesRequest) (*openfgav1.ReadChangesResponse, error) {
	if err := validated(req); err != nil {
		return nil, err
	}
	size, err := pageSize(req.GetPageSize())
	if err != nil {
		return nil, err
	}
	tok, err := decodeToken(req.GetContinuationToken(), "changes")
	if err != nil {
		return nil, err
	}
	var after store.Revision
	if tok != "" {
		typ, rev, ok := cutObject(tok)
		n, err := strconv.ParseUint(rev, 10, 64)
		if !ok || err != nil {
			return nil, invalidContinuationToken()
		}
		if typ != "_"+req.GetType() {
			return nil, fgaError(openfgav1.ErrorCode_query_string_type_continuation_token_mismatch, "The type in the querystring and the continuation token don't match")
		}
		after = store.Revision(n)
	}
	var since time.Time
	if tok == "" && req.GetStartTime() != nil {
		since = req.GetStartTime().AsTime()
	}
	st, err := s.store(req.GetStoreId())
	if err != nil {
		return nil, err
	}
	changes, last, err := st.changes(ctx, after, since, req.GetType(), size)
	if err != nil {
		return nil, err
	}
	return &openfgav1.ReadChangesResponse{Changes: changes, ContinuationToken: encodeToken("changes", "_"+req.GetType()+":"+strconv.FormatUint(uint64(last), 10))}, nil
}

// changes walks the store's history after revision after up to the head, taking
// whole revisions until size changes are taken. It returns them and the revision
// they end at.
func (st *fgaStore) changes(ctx context.Context, after store.Revision, since time.Time, typ string, size int) ([]*openfgav1.TupleChange, store.Revision, error) {
	w, ok := st.data.(store.Watcher)
	if !ok {
		return nil, 0, fgaError(openfgav1.NotFoundErrorCode_unimplemented, "this datastore keeps no history of changes")
	}
	head, err := st.data.HeadRevision(ctx)
	if err != nil {
		return nil, 0, storeError(err)
	}
	if after >= head {
		return nil, after, nil
	}
	if after == 0 {
		if after, err = st.oldest(ctx, head); err != nil {
			return nil, 0, err
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var out []*openfgav1.TupleChange
	last, scanned := after, 0
	for c, err := range w.Watch(ctx, after, store.WatchOptions{CheckpointInterval: time.Millisecond}) {
		if err != nil {
			return nil, 0, storeError(err)
		}
		if !c.Checkpoint {
			out = append(out, revisionChanges(c, since, typ)...)
			last = c.Revision
			scanned++
		}
		if c.Revision >= head || len(out) >= size || scanned >= maxChangesScanned {
			break
		}
	}
	return out, last, nil
}

// oldest finds the oldest revision the store still reads (older ones are past its
// GC window), where a walk of all its history starts: stores tell it only by
// refusing to read below it.
func (st *fgaStore) oldest(ctx context.Context, head store.Revision) (store.Revision, error) {
	lo, hi := store.Revision(0), head
	for lo < hi {
		mid := lo + (hi-lo)/2
		_, err := st.data.Reader(ctx, mid)
		switch {
		case err == nil:
			hi = mid
		case errors.Is(err, store.ErrRevisionGone):
			lo = mid + 1
		default:
			return 0, storeError(err)
		}
	}
	return lo, nil
}

// revisionChanges are one revision's tuple changes, stamped with its clock, of the
// type asked for (all without one); none when it was made before since.
func revisionChanges(c store.Change, since time.Time, typ string) []*openfgav1.TupleChange {
	var at time.Time
	for _, u := range c.Updates {
		if t := clockTime(u.Relationship); !t.IsZero() {
			at = t
		}
	}
	if !since.IsZero() && at.Before(since) {
		return nil
	}
	var out []*openfgav1.TupleChange
	for _, u := range c.Updates {
		if u.Relationship.Resource.Type == clockType || (typ != "" && u.Relationship.Resource.Type != typ) {
			continue
		}
		tk := fga.TupleKey(u.Relationship)
		if tk == nil {
			continue
		}
		op := openfgav1.TupleOperation_TUPLE_OPERATION_WRITE
		if u.Op == store.ChangeDelete {
			op = openfgav1.TupleOperation_TUPLE_OPERATION_DELETE
			tk.Condition = nil
		}
		out = append(out, &openfgav1.TupleChange{TupleKey: tk, Operation: op, Timestamp: timestamppb.New(at)})
	}
	return out
}
