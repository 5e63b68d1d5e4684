package sqlstore

import (
	"strings"
	"time"

	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/store"
)

// FilterConditions returns the conditions selecting f's relationships, with their
// parameters added to a. Expired relationships (expiration at or before now) are left
// out unless f.IncludeExpired. Id lists become `= ANY($n)` so that one statement
// serves many ids; a resource id prefix becomes an index range.
func FilterConditions(f store.Filter, now time.Time, a *Args) []string {
	var conds []string
	if f.ResourceType != "" {
		conds = append(conds, "resource_type = "+a.Add(f.ResourceType))
	}
	if len(f.ResourceIDs) == 1 {
		conds = append(conds, "resource_id = "+a.Add(f.ResourceIDs[0]))
	} else if len(f.ResourceIDs) > 1 {
		conds = append(conds, "resource_id = ANY("+a.Add(f.ResourceIDs)+")")
	}
	if p := f.ResourceIDPrefix; p != "" {
		conds = append(conds, "resource_id >= "+a.Add(p))
		if upper, ok := PrefixUpperBound(p); ok {
			conds = append(conds, "resource_id < "+a.Add(upper))
		} else {
			conds = append(conds, `resource_id LIKE `+a.Add(likePrefix(p)))
		}
	}
	if f.Relation != "" {
		conds = append(conds, "relation = "+a.Add(f.Relation))
	}
	if s := f.Subject; s != nil {
		conds = append(conds, subjectConditions(*s, a)...)
	}
	if !f.IncludeExpired {
		conds = append(conds, "(expiration IS NULL OR expiration > "+a.Add(now)+")")
	}
	return conds
}

func subjectConditions(s store.SubjectFilter, a *Args) []string {
	var conds []string
	if s.Type != "" {
		conds = append(conds, "subject_type = "+a.Add(s.Type))
	}
	if len(s.IDs) == 1 {
		conds = append(conds, "subject_id = "+a.Add(s.IDs[0]))
	} else if len(s.IDs) > 1 {
		conds = append(conds, "subject_id = ANY("+a.Add(s.IDs)+")")
	}
	if s.RelationSet {
		conds = append(conds, "subject_relation = "+a.Add(s.Relation))
	}
	return conds
}

// likePrefix escapes p for LIKE (default escape character backslash) and appends %.
func likePrefix(p string) string {
	r := strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)
	return r.Replace(p) + "%"
}

// Select is one page of a relationship query.
type Select struct {
	Table string
	// AsOf, when not empty, is placed after the table name (CockroachDB's
	// `AS OF SYSTEM TIME ...`).
	AsOf string
	// Extra are further conditions, such as a revision's visibility predicate, whose
	// parameters are already in Args.
	Extra  []string
	Filter store.Filter
	Now    time.Time
	Limit  int // 0: none
}

// Build renders s with parameters added to a; after, when not nil, is the key the page
// resumes after.
func (s Select) Build(a *Args, after *rel.Key) string {
	conds := FilterConditions(s.Filter, s.Now, a)
	conds = append(conds, s.Extra...)
	if after != nil {
		conds = append(conds, AfterKey(*after, a))
	}
	var b strings.Builder
	b.WriteString("SELECT " + SelectColumns + " FROM " + s.Table)
	if s.AsOf != "" {
		b.WriteString(" " + s.AsOf)
	}
	b.WriteString(" WHERE " + And(conds) + " " + OrderBy)
	if s.Limit > 0 {
		b.WriteString(" LIMIT " + a.Add(int64(s.Limit)))
	}
	return b.String()
}
