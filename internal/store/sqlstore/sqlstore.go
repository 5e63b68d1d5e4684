// Package sqlstore is the SQL layer shared by the PostgreSQL and CockroachDB stores:
// it turns a store.Filter into an indexed WHERE clause with numbered parameters, pages
// through results in key order with keyset cursors, encodes caveats and expirations
// into columns and back, checks update batches before they reach the database,
// classifies driver errors (retryable conflicts, an unreachable server), opens
// connection pools, serializes a write transaction's reads, keeps the schema version
// in latch_migrations (Migrations) and relationship counter registrations in
// latch_relationship_counters (Counters).
//
// Both dialects store relationships in one table whose key columns use the "C"
// collation, so that the database's ORDER BY agrees with store.CompareKeys (bytewise).
package sqlstore

import (
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/latch-authz/latch/internal/rel"
)

// SelectColumns are the columns ScanRelationship reads, in order.
const SelectColumns = "resource_type, resource_id, relation, subject_type, subject_id, subject_relation, caveat_name, caveat_context, expiration"

// OrderBy orders rows by relationship key.
const OrderBy = "ORDER BY resource_type, resource_id, relation, subject_type, subject_id, subject_relation"

// Args collects positional parameters ($1, $2, ...) while a statement is built.
type Args struct{ Values []any }

// Add appends v and returns its placeholder.
func (a *Args) Add(v any) string {
	a.Values = append(a.Values, v)
	return "$" + strconv.Itoa(len(a.Values))
}

// keyTuple is the row value compared with a cursor.
const keyTuple = "(resource_type, resource_id, relation, subject_type, subject_id, subject_relation)"

// AfterKey returns the condition selecting keys strictly after k. A row comparison
// lets the forward index seek straight to the resume position.
func AfterKey(k rel.Key, a *Args) string {
	return keyTuple + " > (" + strings.Join([]string{
		a.Add(k.ResourceType), a.Add(k.ResourceID), a.Add(k.Relation),
		a.Add(k.SubjectType), a.Add(k.SubjectID), a.Add(k.SubjectRelation),
	}, ", ") + ")"
}

// PrefixUpperBound returns the smallest string greater than every string starting
// with p, in bytewise (UTF-8 code point) order, so a prefix becomes an index range.
// ok is false when there is none (p is empty or made only of the last code point).
func PrefixUpperBound(p string) (upper string, ok bool) {
	for p != "" {
		r, size := utf8.DecodeLastRuneInString(p)
		p = p[:len(p)-size]
		if r == utf8.RuneError && size <= 1 {
			continue // not valid UTF-8: drop the byte and bump what precedes it
		}
		next := r + 1
		if next == 0xD800 { // skip the surrogate range, which UTF-8 cannot encode
			next = 0xE000
		}
		if next <= utf8.MaxRune {
			return p + string(next), true
		}
	}
	return "", false
}

// And joins conditions with AND; no conditions is TRUE.
func And(conds []string) string {
	if len(conds) == 0 {
		return "TRUE"
	}
	return strings.Join(conds, " AND ")
}
