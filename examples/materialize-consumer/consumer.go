package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	v0 "github.com/authzed/authzed-go/proto/authzed/api/materialize/v0"
	v1 "github.com/authzed/authzed-go/proto/authzed/api/v1"
	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// consumer keeps member_to_set and set_to_set in a PostgreSQL database equal to the
// permission sets of a Materialize endpoint at the revision materialize_state names.
type consumer struct {
	db     *pgxpool.Pool
	client v0.WatchPermissionSetsServiceClient
	// pageSize is the limit of each LookupPermissionSets stream.
	pageSize uint32
	log      *slog.Logger
}

// A failing call is retried after initialBackoff, doubling up to maxBackoff.
const (
	initialBackoff = 100 * time.Millisecond
	maxBackoff     = 30 * time.Second
)

// run consumes until ctx ends or an error that retrying cannot cure (a bad key, an
// endpoint without the service, a malformed change), which it returns. Everything it
// stores is in the database, so a run killed at any point resumes where the last
// committed transaction left off.
func (c *consumer) run(ctx context.Context) error {
	if err := ensureTables(ctx, c.db); err != nil {
		return err
	}
	backoff := initialBackoff
	for {
		st, err := loadState(ctx, c.db)
		if err == nil {
			if st.rebuild {
				err = c.rebuild(ctx, st)
			} else {
				err = c.watch(ctx, st.revision)
			}
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		switch {
		case err == nil:
			backoff = initialBackoff
			continue
		case errors.Is(err, errProgress):
			// Stored something, then the stream broke: reconnect at once.
			c.log.Info("materialize: reconnecting", "err", err)
			backoff = initialBackoff
			continue
		case fatal(err):
			return err
		case status.Code(err) == codes.Aborted || status.Code(err) == codes.OutOfRange:
			// The snapshot the rebuild was reading, or the history the watch
			// resumes from, is gone: start over from a fresh snapshot.
			c.log.Warn("materialize: starting a fresh LookupPermissionSets", "reason", err)
			err = beginRebuild(ctx, c.db, nil)
			if err == nil {
				continue
			}
		}
		c.log.Info("materialize: retrying", "err", err, "after", backoff)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, maxBackoff)
	}
}

// errProgress wraps the end of a call that stored something before it failed: the
// retry need not wait.
var errProgress = errors.New("stored progress before")

// fatal reports whether retrying err cannot help.
func fatal(err error) bool {
	if errors.Is(err, errBadChange) {
		return true
	}
	switch status.Code(err) {
	case codes.InvalidArgument, codes.Unauthenticated, codes.PermissionDenied, codes.Unimplemented, codes.NotFound:
		return true
	}
	return false
}

// rebuild runs LookupPermissionSets into the fresh tables, page by page from the
// stored cursor, until a stream yields nothing; then serves them.
func (c *consumer) rebuild(ctx context.Context, st state) error {
	if st.rebuildCursor == nil {
		// Nothing stored yet: whatever the fresh tables hold is from an
		// abandoned rebuild.
		if err := beginRebuild(ctx, c.db, st.rebuildAt); err != nil {
			return err
		}
		c.log.Info("materialize: LookupPermissionSets begins", "at", st.rebuildAt.GetToken())
	}
	cursor, rev := st.rebuildCursor, st.rebuildRevision
	for {
		n, last, err := c.lookupPage(ctx, st.rebuildAt, cursor)
		if cursor != nil && status.Code(err) == codes.InvalidArgument {
			// The server no longer takes the cursor (its configuration of the
			// sets changed, say): the rows stored with it are of no use either.
			c.log.Warn("materialize: the stored cursor was refused; LookupPermissionSets starts over", "err", err)
			return beginRebuild(ctx, c.db, st.rebuildAt)
		}
		if err != nil {
			return err
		}
		if n == 0 {
			break
		}
		cursor = last.cursor
		if last.rev != nil {
			rev = last.rev
		}
	}
	if rev == nil {
		// An empty snapshot carries no revision: resume after the one asked for,
		// or from the head when none was (nothing is materialized yet).
		rev = st.rebuildAt
	}
	if err := finishRebuild(ctx, c.db, rev); err != nil {
		return err
	}
	c.log.Info("materialize: LookupPermissionSets done; watching", "revision", rev.GetToken())
	return nil
}

// page is where a stored page of LookupPermissionSets ends.
type page struct {
	cursor *v0.Cursor
	rev    *v1.ZedToken
}

// lookupPage reads one LookupPermissionSets stream after cursor and stores what it
// read with the cursor of its last message, in one transaction. It returns how many
// permission sets it stored.
func (c *consumer) lookupPage(ctx context.Context, at *v1.ZedToken, cursor *v0.Cursor) (int, page, error) {
	req := &v0.LookupPermissionSetsRequest{Limit: c.pageSize, OptionalAtRevision: at, OptionalStartingAfterCursor: cursor}
	if cursor != nil {
		req.Limit = cursor.GetLimit() // the server refuses a limit other than the cursor's
	}
	stream, err := c.client.LookupPermissionSets(ctx, req)
	if err != nil {
		return 0, page{}, err
	}
	var changes []*v0.PermissionSetChange
	var last page
	var recvErr error
	for {
		resp, err := stream.Recv()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				recvErr = err
			}
			break
		}
		changes = append(changes, resp.GetChange())
		last = page{cursor: resp.GetCursor(), rev: resp.GetChange().GetAtRevision()}
	}
	if len(changes) > 0 {
		// What arrived before a failure is valid up to its cursor: keep it.
		if err := storePage(ctx, c.db, changes, last.cursor); err != nil {
			return 0, page{}, err
		}
		if recvErr != nil {
			return 0, page{}, fmt.Errorf("%w: %w", errProgress, recvErr)
		}
	}
	return len(changes), last, recvErr
}

// watch applies WatchPermissionSets after rev to the served tables, one transaction
// per completed revision, until the stream fails or asks for a rebuild.
func (c *consumer) watch(ctx context.Context, rev *v1.ZedToken) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := c.client.WatchPermissionSets(ctx, &v0.WatchPermissionSetsRequest{OptionalStartingAfter: rev})
	if err != nil {
		return err
	}
	var changes []*v0.PermissionSetChange
	stored := false
	for {
		resp, err := stream.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = errors.New("WatchPermissionSets ended")
			}
			if stored {
				return fmt.Errorf("%w: %w", errProgress, err)
			}
			return err
		}
		switch r := resp.GetResponse().(type) {
		case *v0.WatchPermissionSetsResponse_Change:
			changes = append(changes, r.Change)
		case *v0.WatchPermissionSetsResponse_CompletedRevision:
			if err := storeRevision(ctx, c.db, changes, r.CompletedRevision); err != nil {
				return err
			}
			changes, stored = changes[:0], true
		case *v0.WatchPermissionSetsResponse_BreakingSchemaChange:
			// The served tables are stale from change_at on; they stay served
			// while fresh ones fill. The snapshot at change_at may not be ready
			// yet (FailedPrecondition), which the rebuild retries.
			c.log.Warn("materialize: breaking schema change; rebuilding", "at", r.BreakingSchemaChange.GetChangeAt().GetToken())
			return beginRebuild(ctx, c.db, r.BreakingSchemaChange.GetChangeAt())
		case *v0.WatchPermissionSetsResponse_LookupPermissionSetsRequired:
			at := r.LookupPermissionSetsRequired.GetRequiredLookupAt()
			c.log.Warn("materialize: LookupPermissionSets required; rebuilding", "at", at.GetToken())
			return beginRebuild(ctx, c.db, at)
		default:
			return fmt.Errorf("%w: an unknown WatchPermissionSets response %v", errBadChange, resp)
		}
	}
}
