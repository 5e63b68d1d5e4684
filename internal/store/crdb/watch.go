package crdb

import (
	"context"
	"errors"

	"github.com/latch-authz/latch/internal/store"
)

// errWatchUnsupported: store has no watch interface yet; see Watch.
var errWatchUnsupported = errors.New("cockroachdb: watch is not implemented yet")

// ChangefeedSQL is the core (sinkless) changefeed a watch reads: every change to the
// relationship and schema tables after rev, with its commit timestamp (updated) and
// periodic resolved timestamps, which tell a watcher that no change at or below them
// is still to come, so it can emit a revision's changes whole.
func ChangefeedSQL(after store.Revision) string {
	return "EXPERIMENTAL CHANGEFEED FOR latch_relationships, latch_schema WITH updated, diff, resolved = '1s', cursor = '" +
		DecodeRevision(after).String() + "'"
}

// Watch is the stub where the changefeed-backed watch will go once store defines a
// watch interface: it will run ChangefeedSQL on a dedicated connection, buffer rows
// per `updated` timestamp and emit them when a resolved timestamp passes them.
func (s *Store) Watch(ctx context.Context, after store.Revision) error {
	return errWatchUnsupported
}
