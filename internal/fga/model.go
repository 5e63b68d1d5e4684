// Package fga owns OpenFGA's data model over latch's IR: its modeling language (parsed
// by OpenFGA's own transformer) and its JSON/proto authorization models, validated as
// WriteAuthorizationModel validates them and compiled to an *ir.Schema; the naming of
// OpenFGA tuples as stored relationships and back; which stored tuples a model admits;
// contextual tuples; ListObjects and ListUsers, walked as OpenFGA walks them; and
// OpenFGA's error codes. It imports no gRPC or HTTP: the API in
// internal/server/openfga sits above it.
//
// The representation: an OpenFGA relation r on type T is an IR permission named r (its
// whole rewrite), and the tuples assigned to it directly (`this`) are an IR relation
// named StoredRelation(r), a name no OpenFGA relation can have. Tuples are always
// stored under that name, so they mean the same thing under every model version.
package fga

import (
	"fmt"
	"strings"

	openfgav1 "github.com/openfga/api/proto/openfga/v1"
	"github.com/openfga/language/pkg/go/graph"

	"github.com/latch-authz/latch/internal/schema/ir"
)

// storedSuffix makes the name of a relation's directly assigned tuples. OpenFGA names
// may not contain '#', so no OpenFGA relation is named like one of these.
const storedSuffix = "#this"

// StoredRelation returns the stored relation name of OpenFGA relation r's tuples.
func StoredRelation(r string) string { return r + storedSuffix }

// relationOf returns the OpenFGA relation a stored relation name holds the tuples of,
// and false for a name that is not a stored relation.
func relationOf(stored string) (string, bool) { return strings.CutSuffix(stored, storedSuffix) }

// Model is a validated authorization model compiled for the engine.
type Model struct {
	Proto  *openfgav1.AuthorizationModel
	Schema *ir.Schema // what the engine evaluates

	// direct holds each relation's type restrictions, by type and relation.
	direct map[string]map[string][]*openfgav1.RelationReference
	// graph is OpenFGA's weighted graph of the model (nil where OpenFGA builds none),
	// which its ListObjects pipeline walks (pipelineObjects).
	graph *graph.WeightedAuthorizationModelGraph
}

// Problem is one thing wrong with a model: at Line and Col (1-based) of DSL source, or
// at Path in a JSON/proto model ("type_definitions[2].relations.viewer").
type Problem struct {
	Line, Col int
	Path      string
	Msg       string
	// File names the module file of a modular model ("" otherwise).
	File string
}

func (p Problem) Error() string {
	if p.File != "" {
		q := p
		q.File = ""
		return p.File + ":" + q.Error()
	}
	switch {
	case p.Line > 0 && p.Path != "":
		return fmt.Sprintf("%d:%d (%s): %s", p.Line, p.Col, p.Path, p.Msg)
	case p.Line > 0:
		return fmt.Sprintf("%d:%d: %s", p.Line, p.Col, p.Msg)
	case p.Path != "":
		return p.Path + ": " + p.Msg
	}
	return p.Msg
}

// Relation returns the directly related user types of relation on typ, and whether
// the type has that relation.
func (m *Model) Relation(typ, relation string) ([]*openfgav1.RelationReference, bool) {
	rels, ok := m.direct[typ]
	if !ok {
		return nil, false
	}
	d, ok := rels[relation]
	return d, ok
}

// HasType reports whether the model defines typ.
func (m *Model) HasType(typ string) bool {
	_, ok := m.direct[typ]
	return ok
}
