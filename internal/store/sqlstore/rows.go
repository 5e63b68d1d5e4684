package sqlstore

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/latch-authz/latch/internal/rel"
)

// ScanRelationship reads one row of SelectColumns.
func ScanRelationship(row pgx.Row) (rel.Relationship, error) {
	var r rel.Relationship
	var caveatName *string
	var caveatContext []byte
	var expiration *time.Time
	err := row.Scan(&r.Resource.Type, &r.Resource.ID, &r.Relation,
		&r.Subject.Object.Type, &r.Subject.Object.ID, &r.Subject.Relation,
		&caveatName, &caveatContext, &expiration)
	if err != nil {
		return r, err
	}
	if caveatName != nil {
		r.Caveat = &rel.Caveat{Name: *caveatName}
		if len(caveatContext) > 0 {
			if err := json.Unmarshal(caveatContext, &r.Caveat.Context); err != nil {
				return r, fmt.Errorf("caveat context of %s is not a JSON object: %w", rel.String(r), err)
			}
		}
	}
	if expiration != nil {
		t := expiration.UTC()
		r.Expiration = &t
	}
	return r, nil
}

// KeyArrays holds relationship keys column by column, for `unnest($1::text[], ...)`:
// one statement carries a whole batch.
type KeyArrays struct {
	ResourceTypes, ResourceIDs, Relations, SubjectTypes, SubjectIDs, SubjectRelations []string
}

// Add appends k.
func (c *KeyArrays) Add(k rel.Key) {
	c.ResourceTypes = append(c.ResourceTypes, k.ResourceType)
	c.ResourceIDs = append(c.ResourceIDs, k.ResourceID)
	c.Relations = append(c.Relations, k.Relation)
	c.SubjectTypes = append(c.SubjectTypes, k.SubjectType)
	c.SubjectIDs = append(c.SubjectIDs, k.SubjectID)
	c.SubjectRelations = append(c.SubjectRelations, k.SubjectRelation)
}

// Prefix returns the first n keys.
func (c *KeyArrays) Prefix(n int) KeyArrays {
	return KeyArrays{c.ResourceTypes[:n], c.ResourceIDs[:n], c.Relations[:n], c.SubjectTypes[:n], c.SubjectIDs[:n], c.SubjectRelations[:n]}
}

// Len is the number of keys.
func (c *KeyArrays) Len() int { return len(c.ResourceTypes) }

// Args returns the six arrays in key column order.
func (c *KeyArrays) Args() []any {
	return []any{c.ResourceTypes, c.ResourceIDs, c.Relations, c.SubjectTypes, c.SubjectIDs, c.SubjectRelations}
}

// RowArrays holds whole relationships column by column for a batched INSERT.
type RowArrays struct {
	KeyArrays
	CaveatNames    []*string
	CaveatContexts []*string // JSON text
	Expirations    []*time.Time
}

// Add appends r, failing when its caveat context cannot be stored as JSON.
func (c *RowArrays) Add(r rel.Relationship) error {
	name, ctx, err := EncodeCaveat(r.Caveat)
	if err != nil {
		return err
	}
	c.KeyArrays.Add(r.Key())
	c.CaveatNames = append(c.CaveatNames, name)
	c.CaveatContexts = append(c.CaveatContexts, ctx)
	c.Expirations = append(c.Expirations, r.Expiration)
	return nil
}

// Args returns the nine arrays in SelectColumns order.
func (c *RowArrays) Args() []any {
	return append(c.KeyArrays.Args(), c.CaveatNames, c.CaveatContexts, c.Expirations)
}

// EncodeCaveat returns the caveat_name and caveat_context column values of c (nil when
// absent). An empty context is stored as NULL.
func EncodeCaveat(c *rel.Caveat) (name, context *string, err error) {
	if c == nil {
		return nil, nil, nil
	}
	n := c.Name
	if len(c.Context) == 0 {
		return &n, nil, nil
	}
	b, err := json.Marshal(c.Context)
	if err != nil {
		return nil, nil, fmt.Errorf("caveat context cannot be stored as JSON: %w", err)
	}
	s := string(b)
	return &n, &s, nil
}

// CopyRow returns r as a row of SelectColumns for COPY.
func CopyRow(r rel.Relationship) ([]any, error) {
	name, ctx, err := EncodeCaveat(r.Caveat)
	if err != nil {
		return nil, err
	}
	return []any{
		r.Resource.Type, r.Resource.ID, r.Relation, r.Subject.Object.Type, r.Subject.Object.ID,
		r.Subject.Relation, name, ctx, r.Expiration,
	}, nil
}
