package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"unicode/utf8"
)

var (
	// ErrCounterExists: RegisterCounter was given a name that is already registered.
	ErrCounterExists = errors.New("a relationship counter with that name is already registered")
	// ErrCounterUnknown: no relationship counter is registered under the name.
	ErrCounterUnknown = errors.New("no relationship counter is registered under that name")
)

// Counters keeps named relationship counters (SpiceDB's experimental counter API): a
// filter registered under a name, so that the relationships it matches can be counted
// later. A registration is kept as durably as the store keeps relationships, but it is
// not part of their history: it takes effect at once, for reads at every revision, and
// makes no new revision.
//
// Every backend implements it and Store includes it, rather than leaving it an
// optional interface found by type assertion: the counter API must work on whatever
// store the server runs on, so an assertion would only add a branch that never runs.
type Counters interface {
	// RegisterCounter registers f under name. It fails with ErrCounterExists when the
	// name is taken, and with an error when f holds a string that is not UTF-8.
	RegisterCounter(ctx context.Context, name string, f Filter) error
	// UnregisterCounter removes the counter named name; ErrCounterUnknown when there
	// is none.
	UnregisterCounter(ctx context.Context, name string) error
	// CounterFilter returns the filter registered under name, exactly as it was
	// registered; ErrCounterUnknown when there is none.
	CounterFilter(ctx context.Context, name string) (Filter, error)
}

// counterFilterVersion is the layout EncodeCounterFilter writes. A new layout is a new
// version, and DecodeCounterFilter goes on reading the old ones.
const counterFilterVersion = 1

// storedFilter is the stored form of a counter's filter. Its JSON names are its own,
// so renaming a field of Filter does not change what is on disk. Slices have no
// omitempty: a nil slice is stored as null and an empty one as [], so both come back
// as they went in.
type storedFilter struct {
	Version          int            `json:"v"`
	ResourceType     string         `json:"resource_type"`
	ResourceIDs      []string       `json:"resource_ids"`
	ResourceIDPrefix string         `json:"resource_id_prefix"`
	Relation         string         `json:"relation"`
	Subject          *storedSubject `json:"subject"`
	IncludeExpired   bool           `json:"include_expired"`
}

type storedSubject struct {
	Type        string   `json:"type"`
	IDs         []string `json:"ids"`
	Relation    string   `json:"relation"`
	RelationSet bool     `json:"relation_set"`
}

// EncodeCounterFilter is the stored form of a counter's filter: versioned JSON, the
// same in every backend. JSON would replace bytes that are not UTF-8, so a filter
// holding any is refused rather than stored altered.
func EncodeCounterFilter(f Filter) ([]byte, error) {
	sf := storedFilter{
		Version: counterFilterVersion, ResourceType: f.ResourceType, ResourceIDs: f.ResourceIDs,
		ResourceIDPrefix: f.ResourceIDPrefix, Relation: f.Relation, IncludeExpired: f.IncludeExpired,
	}
	strs := append([]string{f.ResourceType, f.ResourceIDPrefix, f.Relation}, f.ResourceIDs...)
	if s := f.Subject; s != nil {
		sf.Subject = &storedSubject{Type: s.Type, IDs: s.IDs, Relation: s.Relation, RelationSet: s.RelationSet}
		strs = append(append(strs, s.Type, s.Relation), s.IDs...)
	}
	for _, s := range strs {
		if !utf8.ValidString(s) {
			return nil, fmt.Errorf("relationship counter filter %s holds a string that is not valid UTF-8", f)
		}
	}
	return json.Marshal(sf)
}

// DecodeCounterFilter reads what EncodeCounterFilter wrote.
func DecodeCounterFilter(raw []byte) (Filter, error) {
	var sf storedFilter
	if err := json.Unmarshal(raw, &sf); err != nil {
		return Filter{}, fmt.Errorf("stored relationship counter filter is damaged: %w", err)
	}
	if sf.Version != counterFilterVersion {
		return Filter{}, fmt.Errorf("stored relationship counter filter has version %d; this latch reads version %d: upgrade latch", sf.Version, counterFilterVersion)
	}
	f := Filter{
		ResourceType: sf.ResourceType, ResourceIDs: sf.ResourceIDs, ResourceIDPrefix: sf.ResourceIDPrefix,
		Relation: sf.Relation, IncludeExpired: sf.IncludeExpired,
	}
	if s := sf.Subject; s != nil {
		f.Subject = &SubjectFilter{Type: s.Type, IDs: s.IDs, Relation: s.Relation, RelationSet: s.RelationSet}
	}
	return f, nil
}
