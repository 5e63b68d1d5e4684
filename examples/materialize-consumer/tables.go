package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	v0 "github.com/authzed/authzed-go/proto/authzed/api/materialize/v0"
	v1 "github.com/authzed/authzed-go/proto/authzed/api/v1"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/protobuf/proto"
)

// The tables are AuthZed's recommended pair, each row one field of a permission set
// change stored as it came: member_to_set holds each set's direct members, set_to_set
// every set below each set (the server sends the transitive closure, so one join hop
// answers). Columns are text rather than the documentation's varchar(100): object ids
// may be up to 1024 bytes. The primary keys make applying a change idempotent, which
// replaying a revision after a crash requires.
const (
	memberToSet = "member_to_set"
	setToSet    = "set_to_set"
	// rebuildSuffix names the fresh tables a LookupPermissionSets fills while the
	// previous ones are still served.
	rebuildSuffix = "_rebuild"
)

// columns are each table's columns, child first: the primary key's order, so the
// join from a user's sets to their parents walks the keys.
var columns = map[string][6]string{
	memberToSet: {"member_type", "member_id", "member_relation", "set_type", "set_id", "set_relation"},
	setToSet:    {"child_type", "child_id", "child_relation", "parent_type", "parent_id", "parent_relation"},
}

// createTable returns the DDL of table (memberToSet or setToSet) named with suffix.
func createTable(table, suffix string) string {
	c := columns[table]
	return fmt.Sprintf(`CREATE TABLE IF NOT EXISTS %[1]s (
	%[2]s text NOT NULL, %[3]s text NOT NULL, %[4]s text NOT NULL,
	%[5]s text NOT NULL, %[6]s text NOT NULL, %[7]s text NOT NULL,
	CONSTRAINT %[1]s_pkey PRIMARY KEY (%[8]s))`, table+suffix, c[0], c[1], c[2], c[3], c[4], c[5], strings.Join(c[:], ", "))
}

// stateDDL is the consumer's progress, one row, always written in the transaction of
// the rows it describes:
//   - revision: the ZedToken member_to_set and set_to_set are complete at; the watch
//     resumes after it. NULL until the first snapshot is in.
//   - rebuild: a LookupPermissionSets into the fresh tables is due or under way;
//     rebuild_at the revision it must be at least as fresh as (NULL: the server's
//     choice), rebuild_cursor the cursor of the last page stored (NULL: not begun),
//     rebuild_revision the snapshot's revision as the pages so far say.
const stateDDL = `CREATE TABLE IF NOT EXISTS materialize_state (
	singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
	revision text,
	rebuild boolean NOT NULL DEFAULT true,
	rebuild_at text,
	rebuild_cursor bytea,
	rebuild_revision text)`

// state is the row of materialize_state.
type state struct {
	revision        *v1.ZedToken
	rebuild         bool
	rebuildAt       *v1.ZedToken
	rebuildCursor   *v0.Cursor
	rebuildRevision *v1.ZedToken
}

// ensureTables creates the tables and the state row when they do not exist.
func ensureTables(ctx context.Context, db *pgxpool.Pool) error {
	return pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		for _, stmt := range []string{
			"SELECT pg_advisory_xact_lock(7283651)", // two first starts must not race on DDL
			createTable(memberToSet, ""), createTable(setToSet, ""), stateDDL,
			"INSERT INTO materialize_state DEFAULT VALUES ON CONFLICT DO NOTHING",
		} {
			if _, err := tx.Exec(ctx, stmt); err != nil {
				return fmt.Errorf("creating the tables: %w", err)
			}
		}
		return nil
	})
}

// loadState reads the state row.
func loadState(ctx context.Context, db *pgxpool.Pool) (state, error) {
	var st state
	var rev, at, rrev *string
	var cursor []byte
	err := db.QueryRow(ctx, "SELECT revision, rebuild, rebuild_at, rebuild_cursor, rebuild_revision FROM materialize_state").
		Scan(&rev, &st.rebuild, &at, &cursor, &rrev)
	if err != nil {
		return st, fmt.Errorf("reading materialize_state: %w", err)
	}
	st.revision, st.rebuildAt, st.rebuildRevision = token(rev), token(at), token(rrev)
	if cursor != nil {
		st.rebuildCursor = &v0.Cursor{}
		if err := proto.Unmarshal(cursor, st.rebuildCursor); err != nil {
			return st, fmt.Errorf("materialize_state.rebuild_cursor is not a cursor: %w", err)
		}
	}
	return st, nil
}

func token(s *string) *v1.ZedToken {
	if s == nil {
		return nil
	}
	return &v1.ZedToken{Token: *s}
}

func text(t *v1.ZedToken) *string {
	if t == nil {
		return nil
	}
	return &t.Token
}

// beginRebuild empties (recreates) the fresh tables and records that a rebuild at
// least as fresh as at is due: whatever a previous rebuild stored is discarded.
func beginRebuild(ctx context.Context, db *pgxpool.Pool, at *v1.ZedToken) error {
	return pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		for _, stmt := range []string{
			"DROP TABLE IF EXISTS " + memberToSet + rebuildSuffix, "DROP TABLE IF EXISTS " + setToSet + rebuildSuffix,
			createTable(memberToSet, rebuildSuffix), createTable(setToSet, rebuildSuffix),
		} {
			if _, err := tx.Exec(ctx, stmt); err != nil {
				return fmt.Errorf("creating the fresh tables: %w", err)
			}
		}
		_, err := tx.Exec(ctx, `UPDATE materialize_state SET rebuild = true, rebuild_at = $1,
			rebuild_cursor = NULL, rebuild_revision = NULL`, text(at))
		return err
	})
}

// storePage adds a page of LookupPermissionSets to the fresh tables with the cursor
// that resumes after it, in one transaction.
func storePage(ctx context.Context, db *pgxpool.Pool, changes []*v0.PermissionSetChange, cursor *v0.Cursor) error {
	b, err := proto.Marshal(cursor)
	if err != nil {
		return err
	}
	var rev *v1.ZedToken
	if n := len(changes); n > 0 {
		rev = changes[n-1].GetAtRevision()
	}
	if rev == nil {
		rev = cursor.GetToken()
	}
	return pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		rows, err := netRows(changes)
		if err != nil {
			return err
		}
		if err := writeRows(ctx, tx, rebuildSuffix, rows); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, "UPDATE materialize_state SET rebuild_cursor = $1, rebuild_revision = $2", b, text(rev))
		return err
	})
}

// finishRebuild serves the fresh tables in place of the old ones and sets the revision
// the watch resumes after, in one transaction: readers see the old tables or the new.
func finishRebuild(ctx context.Context, db *pgxpool.Pool, rev *v1.ZedToken) error {
	return pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		for _, t := range []string{memberToSet, setToSet} {
			for _, stmt := range []string{
				"DROP TABLE " + t,
				"ALTER TABLE " + t + rebuildSuffix + " RENAME TO " + t,
				"ALTER TABLE " + t + " RENAME CONSTRAINT " + t + rebuildSuffix + "_pkey TO " + t + "_pkey",
			} {
				if _, err := tx.Exec(ctx, stmt); err != nil {
					return fmt.Errorf("serving the fresh tables: %w", err)
				}
			}
		}
		_, err := tx.Exec(ctx, `UPDATE materialize_state SET revision = $1, rebuild = false, rebuild_at = NULL,
			rebuild_cursor = NULL, rebuild_revision = NULL`, text(rev))
		return err
	})
}

// storeRevision applies the changes of one revision of WatchPermissionSets to the
// served tables and records the revision, in one transaction.
func storeRevision(ctx context.Context, db *pgxpool.Pool, changes []*v0.PermissionSetChange, rev *v1.ZedToken) error {
	return pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		rows, err := netRows(changes)
		if err != nil {
			return err
		}
		if err := writeRows(ctx, tx, "", rows); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, "UPDATE materialize_state SET revision = $1", rev.GetToken())
		return err
	})
}

// row is one row of member_to_set or set_to_set and whether it is to be present.
type row struct {
	table   string
	cols    [6]string
	present bool
}

// netRows reduces changes, in stream order, to the last operation on each row.
func netRows(changes []*v0.PermissionSetChange) ([]row, error) {
	index := map[[7]string]int{}
	var rows []row
	for _, c := range changes {
		r, err := rowOf(c)
		if err != nil {
			return nil, err
		}
		key := [7]string{r.table, r.cols[0], r.cols[1], r.cols[2], r.cols[3], r.cols[4], r.cols[5]}
		if i, ok := index[key]; ok {
			rows[i].present = r.present
			continue
		}
		index[key] = len(rows)
		rows = append(rows, r)
	}
	return rows, nil
}

// errBadChange is a change the server should never send.
var errBadChange = errors.New("malformed permission set change")

// rowOf is the row a change adds or removes.
func rowOf(c *v0.PermissionSetChange) (row, error) {
	p := c.GetParentSet()
	var r row
	switch c.GetOperation() {
	case v0.PermissionSetChange_SET_OPERATION_ADDED:
		r.present = true
	case v0.PermissionSetChange_SET_OPERATION_REMOVED:
	default:
		return r, fmt.Errorf("%w: operation %v in %v", errBadChange, c.GetOperation(), c)
	}
	switch {
	case p == nil:
		return r, fmt.Errorf("%w: no parent set in %v", errBadChange, c)
	case c.GetChildSet() != nil:
		s := c.GetChildSet()
		r.table = setToSet
		r.cols = [6]string{s.GetObjectType(), s.GetObjectId(), s.GetPermissionOrRelation(), p.GetObjectType(), p.GetObjectId(), p.GetPermissionOrRelation()}
	case c.GetChildMember() != nil:
		m := c.GetChildMember()
		r.table = memberToSet
		r.cols = [6]string{m.GetObjectType(), m.GetObjectId(), m.GetOptionalPermissionOrRelation(), p.GetObjectType(), p.GetObjectId(), p.GetPermissionOrRelation()}
	default:
		return r, fmt.Errorf("%w: no child in %v", errBadChange, c)
	}
	return r, nil
}

// writeRows inserts the present rows and deletes the absent ones of each table (of the
// tables named with suffix), one statement per table and kind.
func writeRows(ctx context.Context, tx pgx.Tx, suffix string, rows []row) error {
	for _, table := range []string{memberToSet, setToSet} {
		c := columns[table]
		cols := strings.Join(c[:], ", ")
		for _, present := range []bool{false, true} {
			var arrays [6][]string
			for _, r := range rows {
				if r.table == table && r.present == present {
					for i := range r.cols {
						arrays[i] = append(arrays[i], r.cols[i])
					}
				}
			}
			if len(arrays[0]) == 0 {
				continue
			}
			sql := fmt.Sprintf("INSERT INTO %s (%s) SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[]) ON CONFLICT DO NOTHING", table+suffix, cols)
			if !present {
				sql = fmt.Sprintf("DELETE FROM %s WHERE (%s) IN (SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[]))", table+suffix, cols)
			}
			if _, err := tx.Exec(ctx, sql, arrays[0], arrays[1], arrays[2], arrays[3], arrays[4], arrays[5]); err != nil {
				return fmt.Errorf("writing %s: %w", table+suffix, err)
			}
		}
	}
	return nil
}

// lookupSQL is AuthZed's documented join of member_to_set and set_to_set ("Find all
// documents evan can view"): the subject's sets, then ONE hop through set_to_set, which
// answers because set_to_set holds every set below a set, not only its direct child
// sets. As written there but for four things:
//   - the types, permission and subject are parameters ($1 subject type, $2 subject
//     id, $3 resource type, $4 permission), and the subject's id is matched directly
//     rather than through a users table;
//   - `documents d` (the application's table) is the resources the sets name, so the
//     example needs no table of its own; an application joins its own table there to
//     sort, filter and page;
//   - a wildcard member (user:*, which latch streams and AuthZed refuses) counts for
//     every subject of its type, as in a check;
//   - both joins to d.id also name the resource type and permission: the documented
//     join matches s2s.parent_id and m2s.set_id to d.id alone, so where a document
//     and a set of another type share an id (document:d1 and group:d1) it returns a
//     document the subject cannot view (TestTablesJoin holds that case).
//
// DISTINCT: several chains may lead to the same document.
const lookupSQL = `SELECT DISTINCT d.id FROM (
	SELECT set_id AS id FROM member_to_set WHERE set_type = $3 AND set_relation = $4
	UNION SELECT parent_id FROM set_to_set WHERE parent_type = $3 AND parent_relation = $4) d
  LEFT JOIN set_to_set s2s ON d.id = s2s.parent_id AND s2s.parent_type = $3 AND s2s.parent_relation = $4
  INNER JOIN member_to_set m2s ON (m2s.set_id = s2s.child_id AND m2s.set_type = s2s.child_type AND m2s.set_relation = s2s.child_relation)
      OR (d.id = m2s.set_id AND m2s.set_type = $3 AND m2s.set_relation = $4)
  WHERE
   m2s.member_id IN ($2, '*') AND
   m2s.member_type = $1 AND
   m2s.member_relation = '' AND ((
      s2s.parent_type = $3 AND
      s2s.parent_relation = $4
    ) OR (
      m2s.set_type = $3 AND
      m2s.set_relation = $4
    ))
ORDER BY d.id`

// lookup returns the ids of the resources of resourceType on which subject
// subjectType:subjectID has permission, and the revision the tables are at, read in
// one snapshot.
func lookup(ctx context.Context, db *pgxpool.Pool, resourceType, permission, subjectType, subjectID string) ([]string, *v1.ZedToken, error) {
	var ids []string
	var rev *string
	err := pgx.BeginTxFunc(ctx, db, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, "SELECT revision FROM materialize_state").Scan(&rev); err != nil {
			return fmt.Errorf("reading materialize_state (has the consumer run?): %w", err)
		}
		rows, err := tx.Query(ctx, lookupSQL, subjectType, subjectID, resourceType, permission)
		if err != nil {
			return err
		}
		ids, err = pgx.CollectRows(rows, pgx.RowTo[string])
		return err
	})
	return ids, token(rev), err
}
