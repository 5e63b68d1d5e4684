package store

import "context"

// Replicated is implemented by a store that may answer reads from read replicas
// (postgres with read replica URIs). Its Reader may read from a replica that has
// reached the revision; PrimaryReader never does. Callers discover it by type
// assertion; a store without it reads from one place, and its Reader is the primary's.
type Replicated interface {
	// PrimaryReader reads at rev as Reader does, from the primary alone: for reads of
	// the head (fully_consistent), which a replica has rarely replayed yet, so that
	// they neither probe the replicas nor depend on replication.
	PrimaryReader(ctx context.Context, rev Revision) (Reader, error)
	// ReadStats counts the reads made so far through the store's readers.
	ReadStats() ReadStats
}

// ReadStats counts pages of relationships read at a revision, by where they were read.
type ReadStats struct {
	Primary uint64 // read from the primary, including reads a failing replica handed back
	Replica uint64 // read from a read replica
}
