package pebble

import (
	"bytes"
	"context"
	"iter"
	"slices"
	"strings"
	"sync"

	"github.com/cockroachdb/pebble/v2"

	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/store"
)

// reader reads a Store at one revision.
type reader struct {
	s   *Store
	rev uint64
}

func (r *reader) Revision() store.Revision { return store.Revision(r.rev) }

// Schema returns the schema text in force at the reader's revision: the newest one
// written at or before it.
func (r *reader) Schema(ctx context.Context) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	if err := r.s.acquire(); err != nil {
		return "", err
	}
	defer r.s.release()
	it, err := r.s.db.NewIterWithContext(ctx, &pebble.IterOptions{LowerBound: []byte{tagSchema}, UpperBound: []byte{tagSchema + 1}})
	if err != nil {
		return "", err
	}
	defer it.Close()
	found := it.SeekGE(schemaKey(r.rev))
	if r.rev < r.s.oldest.Load() {
		return "", store.ErrRevisionGone
	}
	if !found {
		return "", it.Error()
	}
	v, err := it.ValueAndErr()
	return string(v), err
}

// Query yields the relationships matching f at the reader's revision, in key order.
func (r *reader) Query(ctx context.Context, f store.Filter, opts store.QueryOptions) iter.Seq2[store.Item, error] {
	return store.Iterate(ctx, r, f, opts)
}

// QueryEach hands the relationships matching f at the reader's revision to v, in key
// order.
func (r *reader) QueryEach(ctx context.Context, f store.Filter, opts store.QueryOptions, v store.Visitor) error {
	if err := r.s.acquire(); err != nil {
		return err
	}
	defer r.s.release()
	q, pit, err := r.s.newQuery(ctx, r.rev, f, opts, v)
	if err != nil {
		return err
	}
	defer q.free()
	defer r.s.iters.put(pit)
	if q.empty {
		return nil
	}
	q.run()
	if iterStatsHook != nil {
		iterStatsHook(q.it.Stats())
	}
	return q.err
}

// seekAfterMisses is how many consecutive non-matching entries a scan steps over
// before it seeks past the run they belong to: stepping is cheaper than seeking over
// a few entries, seeking far cheaper over many. A variable so that tests can make
// every miss seek.
var seekAfterMisses = 8

// iterStatsHook, when a test sets it, receives each query's iterator statistics.
var iterStatsHook func(pebble.IteratorStats)

// ctxCheckSteps is how many entries a scan visits between checks of its context.
const ctxCheckSteps = 64

// query is one Query call: the filter, compiled for matching raw key fields, the
// plan's iterator, and the consumer.
type query struct {
	s     *Store
	ctx   context.Context
	rev   uint64
	now   expiry // the clock, read at the first version that expires
	f     store.Filter
	limit int
	visit store.Visitor
	it    *pebble.Iterator
	codec store.LazyCursorCodec

	// after is the forward logical key of the cursor: results are strictly after it.
	// afterSeek sorts after every version of it and before any later key.
	after, afterSeek []byte

	empty  bool   // the filter names something no stored relationship can have
	prefix []byte // the filter's resource id prefix
	rids   idSet
	sids   idSet
	ridsBy []string // resource ids in key order
	sidsBy []string // subject ids in key order

	last    []byte // logical key of the newest version already decided
	keyBuf  []byte // room for the keys a plan seeks to, kept with the pooled query
	steps   int
	emitted int
	done    bool // the consumer stopped, the limit was reached or an error occurred
	err     error
}

// newQuery takes a query from its pool, compiles f into it, decodes the cursor and
// takes an iterator from the iterators' pool; the caller puts both back. The revision
// is checked after the iterator exists: the collector raises oldest before it deletes,
// so an iterator opened while rev was still retained (as every one that passes the
// check was) sees all of rev.
func (s *Store) newQuery(ctx context.Context, rev uint64, f store.Filter, opts store.QueryOptions, visit store.Visitor) (*query, pooledIter, error) {
	if err := ctx.Err(); err != nil {
		return nil, pooledIter{}, err
	}
	q := queryPool.Get().(*query)
	q.s, q.ctx, q.rev, q.f, q.limit, q.visit = s, ctx, rev, f, max(opts.Limit, 0), visit
	if opts.After != "" {
		k, err := q.codec.Of(&q.f).Decode(opts.After)
		if err != nil {
			q.free()
			return nil, pooledIter{}, err
		}
		q.after = appendForward(nil, k)
		q.afterSeek = append(bytes.Clone(q.after), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff)
	}
	q.compile()
	pit, err := s.iters.get(s, rev)
	if err != nil {
		q.free()
		return nil, pooledIter{}, err
	}
	if rev < s.oldest.Load() {
		s.iters.put(pit)
		q.free()
		return nil, pooledIter{}, store.ErrRevisionGone
	}
	q.it = pit.it
	return q, pit, nil
}

// queryPool recycles queries: a check makes several small ones.
var queryPool = sync.Pool{New: func() any { return new(query) }}

// free returns q to the pool, keeping only its key buffer while it is small.
func (q *query) free() {
	last, keyBuf := q.last, q.keyBuf
	*q = query{}
	if cap(last) <= 256 {
		q.last = last[:0]
	}
	if cap(keyBuf) <= 256 {
		q.keyBuf = keyBuf[:0]
	}
	queryPool.Put(q)
}

// compile prepares the id sets and notes filters that cannot match anything.
func (q *query) compile() {
	f := q.f
	q.prefix = []byte(f.ResourceIDPrefix)
	if hasNUL(f.ResourceType, f.ResourceIDPrefix, f.Relation) {
		q.empty = true
	}
	if len(f.ResourceIDs) > 0 {
		q.ridsBy = usableIDs(f.ResourceIDs, f.ResourceIDPrefix)
		q.rids = newIDSet(q.ridsBy)
		q.empty = q.empty || len(q.ridsBy) == 0
	}
	if sf := f.Subject; sf != nil {
		if hasNUL(sf.Type, sf.Relation) {
			q.empty = true
		}
		if len(sf.IDs) > 0 {
			q.sidsBy = usableIDs(sf.IDs, "")
			q.sids = newIDSet(q.sidsBy)
			q.empty = q.empty || len(q.sidsBy) == 0
		}
	}
}

// usableIDs returns the ids with prefix that could be stored, sorted and unique: ids
// itself, which the query only reads, when they already are (as a check's one id is).
func usableIDs(ids []string, prefix string) []string {
	ready := true
	for i, id := range ids {
		if !strings.HasPrefix(id, prefix) || hasNUL(id) || i > 0 && ids[i-1] >= id {
			ready = false
			break
		}
	}
	if ready {
		return ids
	}
	out := make([]string, 0, len(ids))
	for _, id := range ids {
		if strings.HasPrefix(id, prefix) && !hasNUL(id) {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// run picks the plan: seeks per listed resource id; otherwise merged runs of the
// reverse index when the subjects are named; otherwise a scan of the resource type
// (or of everything).
func (q *query) run() {
	sf := q.f.Subject
	switch {
	case len(q.ridsBy) > 0:
		q.runResourceIDs()
	case sf != nil && sf.Type != "" && len(q.sidsBy) > 0:
		q.runReverse()
	case q.f.ResourceType != "":
		lo := append(append(append([]byte{tagForward}, q.f.ResourceType...), 0), q.f.ResourceIDPrefix...)
		q.scanForward(lo, prefixEnd(lo))
	default:
		q.scanForward([]byte{tagForward}, []byte{tagForward + 1})
	}
}

// runResourceIDs seeks to each listed resource id of each resource type in turn. With
// no resource type in the filter it skips from one stored type to the next.
func (q *query) runResourceIDs() {
	if t := q.f.ResourceType; t != "" {
		q.scanIDsOfType([]byte(t))
		return
	}
	seek := []byte{tagForward}
	for !q.done && q.it.SeekGE(seek) {
		k := q.it.Key()
		if k[0] != tagForward {
			break
		}
		i := bytes.IndexByte(k, 0)
		if i < 0 {
			q.fail(errCorrupt)
			return
		}
		t := bytes.Clone(k[1:i])
		q.scanIDsOfType(t)
		seek = append(append([]byte{tagForward}, t...), 1)
	}
	if err := q.it.Error(); err != nil {
		q.fail(err)
	}
}

func (q *query) scanIDsOfType(t []byte) {
	sf := q.f.Subject
	exact := q.f.Relation != "" && sf != nil && sf.Type != "" && len(q.sidsBy) > 0 && sf.RelationSet && q.after == nil
	for _, id := range q.ridsBy {
		if q.done {
			return
		}
		lo := append(append(append(append(append(q.keyBuf[:0], tagForward), t...), 0), id...), 0)
		if q.f.Relation != "" {
			lo = append(append(lo, q.f.Relation...), 0)
			// The subject type follows the relation in the key: a read of one type's
			// subjects (a group's nested group#member sets) seeks to their run and never
			// reads the other types' (the group's users).
			if sf != nil && sf.Type != "" && !exact {
				lo = append(append(lo, sf.Type...), 0)
			}
		}
		if exact {
			lo = q.seekKeys(lo)
		} else {
			q.scanForward(lo, prefixEnd(lo))
		}
		q.keyBuf = lo[:0]
	}
}

// seekKeys visits, in key order, the logical key of each of the filter's subject ids
// under the group prefix lo (resource type, id and relation; seekKeys appends to it
// and returns the grown buffer): the filter names every field of them. A prefix seek
// lets each table's bloom filter rule a key out without reading its blocks, as it does
// for most of a check's keys, which are not stored.
func (q *query) seekKeys(lo []byte) []byte {
	sf := q.f.Subject
	key := append(append(lo, sf.Type...), 0)
	group := len(key)
	for _, sid := range q.sidsBy {
		key = append(append(append(append(key[:group], sid...), 0), sf.Relation...), 0)
		for valid := q.it.SeekPrefixGE(key); valid && !q.done; valid = q.it.Next() {
			if fs, ok := q.candidate(q.it.Key()); ok && q.match(&fs) {
				q.consider(&fs)
			}
		}
		if err := q.it.Error(); err != nil {
			q.fail(err)
		}
		if q.done {
			break
		}
	}
	return key
}

// scanForward visits the forward index from lo (or the cursor) to hi, yielding the
// versions visible at the query's revision that match.
func (q *query) scanForward(lo, hi []byte) {
	start := lo
	if q.afterSeek != nil && bytes.Compare(q.afterSeek, start) > 0 {
		start = q.afterSeek
	}
	if hi != nil && bytes.Compare(start, hi) >= 0 {
		return
	}
	misses := 0
	for valid := q.it.SeekGE(start); valid && !q.done; {
		k := q.it.Key()
		if hi != nil && bytes.Compare(k, hi) >= 0 {
			return
		}
		fs, ok := q.candidate(k)
		if !ok {
			valid = q.it.Next()
			continue
		}
		if !q.match(&fs) {
			if misses++; misses >= seekAfterMisses {
				if target := q.skipTarget(&fs); target != nil && bytes.Compare(target, k) > 0 {
					misses = 0
					valid = q.it.SeekGE(target)
					continue
				}
			}
			valid = q.it.Next()
			continue
		}
		misses = 0
		q.consider(&fs)
		valid = q.it.Next()
	}
	if err := q.it.Error(); err != nil {
		q.fail(err)
	}
}

// candidate decides whether the version at k is the one a reader at q.rev sees of its
// relationship (the newest created at or before q.rev) and returns its fields.
func (q *query) candidate(k []byte) (fields, bool) {
	if err := q.tick(); err != nil {
		q.fail(err)
		return fields{}, false
	}
	if !versioned(k) {
		q.fail(errCorrupt)
		return fields{}, false
	}
	logical := k[:len(k)-suffixLen]
	if versionOf(k) > q.rev || bytes.Equal(logical, q.last) {
		return fields{}, false
	}
	q.last = append(q.last[:0], logical...)
	fs, _, ok := parseVersioned(k)
	if !ok {
		q.fail(errCorrupt)
	}
	return fs, ok
}

// match reports whether fields pass the filter.
func (q *query) match(fs *fields) bool {
	f := &q.f
	switch {
	case f.ResourceType != "" && string(fs[fResType]) != f.ResourceType,
		q.rids.set() && !q.rids.has(fs[fResID]),
		!bytes.HasPrefix(fs[fResID], q.prefix),
		f.Relation != "" && string(fs[fRelation]) != f.Relation:
		return false
	}
	sf := f.Subject
	if sf == nil {
		return true
	}
	switch {
	case sf.Type != "" && string(fs[fSubjType]) != sf.Type,
		q.sids.set() && !q.sids.has(fs[fSubjID]),
		sf.RelationSet && string(fs[fSubjRel]) != sf.Relation:
		return false
	}
	return true
}

// skipTarget returns a forward key past the entries that cannot match for the same
// reason as fs (the first field, in key order, that fails), or nil when stepping is
// the only way on.
func (q *query) skipTarget(fs *fields) []byte {
	f := &q.f
	if f.ResourceType != "" && string(fs[fResType]) != f.ResourceType {
		return nil
	}
	if p := f.ResourceIDPrefix; !bytes.HasPrefix(fs[fResID], q.prefix) {
		if string(fs[fResID]) < p {
			return append(fieldPrefix(fs, fResID), p...)
		}
		return nextField(fs, fResType)
	}
	if q.rids.set() && !q.rids.has(fs[fResID]) {
		return nil
	}
	if r := f.Relation; r != "" && string(fs[fRelation]) != r {
		if string(fs[fRelation]) < r {
			return append(append(fieldPrefix(fs, fRelation), r...), 0)
		}
		return nextField(fs, fResID)
	}
	sf := f.Subject
	if sf == nil || sf.Type == "" {
		return nil
	}
	if st := string(fs[fSubjType]); st != sf.Type {
		if st > sf.Type {
			return nextField(fs, fRelation)
		}
		out := append(append(fieldPrefix(fs, fSubjType), sf.Type...), 0)
		if len(q.sidsBy) > 0 {
			out = append(append(out, q.sidsBy[0]...), 0)
		}
		return out
	}
	if !q.sids.set() || q.sids.has(fs[fSubjID]) {
		return nil
	}
	i, _ := slices.BinarySearch(q.sidsBy, string(fs[fSubjID]))
	if i == len(q.sidsBy) {
		return nextField(fs, fRelation)
	}
	return append(append(fieldPrefix(fs, fSubjID), q.sidsBy[i]...), 0)
}

// fieldPrefix returns the forward key prefix holding the first n fields of fs.
func fieldPrefix(fs *fields, n int) []byte {
	out := []byte{tagForward}
	for i := range n {
		out = append(append(out, fs[i]...), 0)
	}
	return out
}

// nextField returns the first forward key after every key whose fields up to and
// including field i equal those of fs.
func nextField(fs *fields, i int) []byte {
	return append(append(fieldPrefix(fs, i), fs[i]...), 1)
}

// consider yields the version under the iterator, with fields fs, if a reader at
// q.rev sees it.
func (q *query) consider(fs *fields) {
	v, err := q.it.ValueAndErr()
	if err != nil {
		q.fail(err)
		return
	}
	if body, ok := q.visible(v); ok {
		q.emitBody(fs, body)
	}
}

// visible returns the body of a version value if the version is live at q.rev and
// has not expired (unless the filter asks for expired ones).
func (q *query) visible(v []byte) ([]byte, bool) {
	deleted, body, err := splitValue(v)
	if err != nil {
		q.fail(err)
		return nil, false
	}
	if deleted != 0 && deleted <= q.rev {
		return nil, false
	}
	if !q.f.IncludeExpired {
		exp, err := bodyExpiry(body)
		if err != nil {
			q.fail(err)
			return nil, false
		}
		if exp.set && !q.now.set {
			q.now = expiryOf(q.s.opts.Now())
		}
		if exp.expiredAt(q.now) {
			return nil, false
		}
	}
	return body, true
}

// emitBody decodes a visible version and yields it.
func (q *query) emitBody(fs *fields, body []byte) {
	k := relKey(fs)
	x := rel.Relationship{
		Resource: rel.ObjectRef{Type: k.ResourceType, ID: k.ResourceID},
		Relation: k.Relation,
		Subject:  rel.SubjectRef{Object: rel.ObjectRef{Type: k.SubjectType, ID: k.SubjectID}, Relation: k.SubjectRelation},
	}
	if err := decodeBody(body, &x); err != nil {
		q.fail(err)
		return
	}
	q.emit(x)
}

// emit hands one result to the consumer.
func (q *query) emit(x rel.Relationship) {
	if err := q.ctx.Err(); err != nil {
		q.fail(err)
		return
	}
	if !q.visit.Visit(store.NewItem(x, q.codec.Of(&q.f))) {
		q.done = true
		return
	}
	if q.emitted++; q.emitted == q.limit {
		q.done = true
	}
}

// fail ends the query with err (the first one wins).
func (q *query) fail(err error) {
	if q.err == nil {
		q.err = err
	}
	q.done = true
}

// idSet answers membership of raw key bytes without allocating: a short list is
// scanned, a long one hashed.
type idSet struct {
	list []string
	m    map[string]struct{}
}

func newIDSet(sorted []string) idSet {
	if len(sorted) <= 8 {
		return idSet{list: sorted}
	}
	m := make(map[string]struct{}, len(sorted))
	for _, id := range sorted {
		m[id] = struct{}{}
	}
	return idSet{list: sorted, m: m}
}

func (s idSet) set() bool { return s.list != nil }

func (s idSet) has(b []byte) bool {
	if s.m != nil {
		_, ok := s.m[string(b)]
		return ok
	}
	for _, id := range s.list {
		if id == string(b) {
			return true
		}
	}
	return false
}
