package server

import (
	"context"
	"errors"
	"slices"
	"time"

	v1 "github.com/authzed/authzed-go/proto/authzed/api/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/latch-authz/latch/internal/store"
	"github.com/latch-authz/latch/internal/store/changefeed"
)

// Watch tuning. Variables so that tests can shrink them.
var (
	// watchCheckpointInterval is how long an idle watch that asked for checkpoints
	// waits before sending one.
	watchCheckpointInterval = time.Second
	// watchBufferSize is how many responses wait for a slow client per watch.
	watchBufferSize = 1024
	// watchBufferTimeout is how long a watch waits for room in a full buffer before it
	// disconnects the client with store.ErrWatchLagging.
	watchBufferTimeout = 2 * time.Second
)

// watchService implements authzed.api.v1.WatchService over a store.Watcher.
type watchService struct {
	v1.UnimplementedWatchServiceServer
	s *Server
}

// Watch streams the committed changes after the start cursor (or from now), one
// response per revision, filtered by object types or relationship filters. The store
// side is pull-based and never slows writers; a client that does not read is cut off
// once watchBufferSize responses have waited watchBufferTimeout for it, with an error
// that tells it to resume from the last revision it received.
func (w *watchService) Watch(req *v1.WatchRequest, stream v1.WatchService_WatchServer) error {
	ctx, cancel := context.WithCancel(stream.Context())
	defer cancel()
	watcher := w.s.watchHub()
	if watcher == nil {
		return w.s.status(&unsupportedError{"watch on this datastore"})
	}
	select {
	case w.s.watchSlots <- struct{}{}:
		defer func() { <-w.s.watchSlots }()
	default:
		return status.Errorf(codes.ResourceExhausted, "too many watch streams: %d are open, the most this server serves (--max-watch-streams); retry later or share one stream", cap(w.s.watchSlots))
	}
	plan, err := newWatchPlan(req)
	if err != nil {
		return w.s.status(err)
	}
	// Filters name the schema's types and relations, as SpiceDB checks them; object
	// types are not checked (SpiceDB does not either).
	for _, f := range req.GetOptionalRelationshipFilters() {
		if err := w.s.checkFilterAtHead(ctx, f, nil); err != nil {
			return w.s.status(err)
		}
	}
	after, err := w.s.watchStart(ctx, req.GetOptionalStartCursor())
	if err != nil {
		return w.s.status(err)
	}
	snd := startWatchSender(stream.Send)
	err = pumpWatch(ctx, watcher.Watch(ctx, after, plan.storeOptions()), plan, snd)
	cancel() // ends the store's watch before waiting for the sender
	return w.s.status(snd.finish(err))
}

// watchHub is the one watch of the store every Watch stream shares (nil when the store
// cannot watch), made at first use.
func (s *Server) watchHub() *changefeed.Hub {
	s.hubOnce.Do(func() {
		if watcher, ok := s.store.(store.Watcher); ok {
			s.hub = changefeed.NewHub(watcher, s.store.HeadRevision, watchCheckpointInterval, 0)
		}
	})
	return s.hub
}

// watchStart is the revision a watch starts after: the cursor's, or the head's.
func (s *Server) watchStart(ctx context.Context, cursor *v1.ZedToken) (store.Revision, error) {
	if cursor != nil {
		rev, err := decodeToken(cursor)
		if e, ok := errors.AsType[*invalidTokenError](err); ok {
			e.watch = true
		}
		return rev, err
	}
	return s.store.HeadRevision(ctx)
}

// pumpWatch turns the store's changes into responses and queues them for sending,
// until the watch fails, the client goes away or the buffer stays full.
func pumpWatch(ctx context.Context, changes func(func(store.Change, error) bool), plan *watchPlan, snd *watchSender[*v1.WatchResponse]) error {
	for c, err := range changes {
		if err != nil {
			return err
		}
		resp, err := plan.response(c)
		if err != nil {
			return err
		}
		if resp == nil {
			continue
		}
		if err := snd.push(ctx, resp); err != nil {
			return err
		}
	}
	return ctx.Err()
}

// watchRequestError: a WatchRequest whose fields contradict each other.
type watchRequestError struct{ msg string }

func (e *watchRequestError) Error() string { return e.msg }

// watchPlan is what a WatchRequest selects.
type watchPlan struct {
	schema, checkpoints bool
	objectTypes         []string
	filters             []store.Filter
}

func newWatchPlan(req *v1.WatchRequest) (*watchPlan, error) {
	p := &watchPlan{objectTypes: req.GetOptionalObjectTypes()}
	if len(p.objectTypes) > 0 && len(req.GetOptionalRelationshipFilters()) > 0 {
		return nil, &watchRequestError{"cannot specify both object types and relationship filters"}
	}
	for _, f := range req.GetOptionalRelationshipFilters() {
		if filterIsEmpty(f) {
			return nil, &invalidFilterError{f.String(), "at least one field of each relationship filter must be set"}
		}
		sf := filterFromV1(f)
		sf.IncludeExpired = true // a change is reported whatever the relationship's expiration
		p.filters = append(p.filters, sf)
	}
	// Relationship updates are always sent, as SpiceDB does: the update kinds only add
	// schema updates and checkpoints to them.
	for _, k := range req.GetOptionalUpdateKinds() {
		switch k {
		case v1.WatchKind_WATCH_KIND_INCLUDE_SCHEMA_UPDATES:
			p.schema = true
		case v1.WatchKind_WATCH_KIND_INCLUDE_CHECKPOINTS:
			p.checkpoints = true
		}
	}
	return p, nil
}

func (p *watchPlan) storeOptions() store.WatchOptions {
	if !p.checkpoints {
		return store.WatchOptions{}
	}
	return store.WatchOptions{CheckpointInterval: watchCheckpointInterval}
}

// response is the WatchResponse for c, or nil when the request selects nothing of it.
func (p *watchPlan) response(c store.Change) (*v1.WatchResponse, error) {
	if c.Checkpoint {
		if !p.checkpoints {
			return nil, nil
		}
		return &v1.WatchResponse{ChangesThrough: tokenFor(c.Revision), IsCheckpoint: true}, nil
	}
	resp := &v1.WatchResponse{ChangesThrough: tokenFor(c.Revision), SchemaUpdated: p.schema && c.SchemaChanged}
	for _, u := range c.Updates {
		if !p.selects(u) {
			continue
		}
		r, err := relationshipToV1(u.Relationship)
		if err != nil {
			return nil, err
		}
		op := v1.RelationshipUpdate_OPERATION_TOUCH
		if u.Op == store.ChangeDelete {
			op = v1.RelationshipUpdate_OPERATION_DELETE
		}
		resp.Updates = append(resp.Updates, &v1.RelationshipUpdate{Operation: op, Relationship: r})
	}
	if len(resp.Updates) == 0 && !resp.SchemaUpdated {
		return nil, nil
	}
	return resp, nil
}

func (p *watchPlan) selects(u store.RelationshipChange) bool {
	if len(p.objectTypes) > 0 {
		return slices.Contains(p.objectTypes, u.Relationship.Resource.Type)
	}
	if len(p.filters) == 0 {
		return true
	}
	for _, f := range p.filters {
		if f.Matches(u.Relationship, time.Time{}) {
			return true
		}
	}
	return false
}

// watchSender sends queued responses on its own goroutine, so that a client that
// stops reading blocks only that goroutine, never the store's watch. Every watch
// stream (Watch, and Materialize's) sends through one.
type watchSender[T any] struct {
	out    chan T
	failed chan struct{} // closed when a Send failed; err says why
	err    error
	done   chan struct{} // closed when the goroutine ends
}

func startWatchSender[T any](send func(T) error) *watchSender[T] {
	s := &watchSender[T]{out: make(chan T, watchBufferSize), failed: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		for resp := range s.out {
			if err := send(resp); err != nil {
				s.err = err
				close(s.failed)
				return
			}
		}
	}()
	return s
}

// push queues resp, waiting up to watchBufferTimeout for room.
func (s *watchSender[T]) push(ctx context.Context, resp T) error {
	select {
	case s.out <- resp:
		return nil
	default:
	}
	t := time.NewTimer(watchBufferTimeout)
	defer t.Stop()
	select {
	case s.out <- resp:
		return nil
	case <-s.failed:
		return s.err
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return store.ErrWatchLagging
	}
}

// finish ends the sender after the watch ended with err and returns the error the
// call ends with. Responses already queued are sent first, unless the client is not
// reading: then the call ends at once, and the sender's pending Send fails when the
// stream closes.
func (s *watchSender[T]) finish(err error) error {
	close(s.out)
	if errors.Is(err, store.ErrWatchLagging) {
		return err
	}
	select {
	case <-s.done:
	case <-time.After(watchBufferTimeout):
		return store.ErrWatchLagging
	}
	if s.err != nil {
		return s.err
	}
	return err
}
