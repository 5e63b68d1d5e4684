package postgres

import "context"

// QueryRowForTest runs a one-row query on s's write pool.
func QueryRowForTest(s *Store, ctx context.Context, sql string, dest ...any) error {
	return s.writes.QueryRow(ctx, sql).Scan(dest...)
}

// ReplicaPagesForTest is how many pages s's replicas have served.
func ReplicaPagesForTest(s *Store) int64 {
	var n int64
	for _, r := range s.replicas {
		n += r.served.Load()
	}
	return n
}
