// Package bench owns latch bench: YAML workloads of weighted steps, the closed and open
// load models that drive them against any server speaking the SpiceDB API, HDR
// histograms of the answers, and the JSON results and HTML reports made from them.
//
// The generator is built to stay out of the way: a fixed pool of worker goroutines,
// each with its own random source, samplers and reusable request messages, so that a
// request costs gRPC's own allocations and little else.
package bench

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/latch-authz/latch/internal/bench/dist"
	"gopkg.in/yaml.v3"
)

// Step types.
const (
	StepCheck           = "check"
	StepCheckBulk       = "check-bulk"
	StepLookupResources = "lookup-resources"
	StepLookupSubjects  = "lookup-subjects"
	StepWrite           = "write"
	StepDelete          = "delete"
	StepRead            = "read"
)

var stepTypes = []string{StepCheck, StepCheckBulk, StepLookupResources, StepLookupSubjects, StepWrite, StepDelete, StepRead}

// Consistency levels a step may ask for.
var consistencies = []string{"minimize_latency", "fully_consistent", "at_least_as_fresh"}

// Workload is a parsed workload file.
type Workload struct {
	Name string
	// Users is the size of the user id space; generators without n use it, and so does
	// the data set. --users overrides it.
	Users int
	// Dataset is what --in-process loads before running (nil: nothing).
	Dataset *DatasetSpec
	// Generators are the named id distributions templates draw from.
	Generators map[string]Generator
	Steps      []Step
	Phases     []Phase
}

// DatasetSpec names a data set of the dataset package.
type DatasetSpec struct {
	Name string
	Seed uint64
}

// Generator is a named id distribution; with Reuse, a draw repeats the previous id with
// that probability (Permify's script reuses 10%).
type Generator struct {
	Spec  dist.Spec
	Reuse float64
	// Scale sizes a generator without n at Scale times Users (0: Users itself), for
	// id spaces that grow with the data set, as deepgroups' documents (2.5 per user).
	Scale float64
	// sized is false when n was not given and comes from Users.
	sized bool
}

// Step is one kind of request and its share of the traffic.
type Step struct {
	Name, Type string
	Weight     int
	// Resource is the resource template (lookup-resources uses only its type).
	Resource Template
	// Subject is the subject template (lookup-subjects uses only its type and relation).
	Subject Template
	// Permission for checks and lookups; Relation for write, delete and read.
	Permission, Relation string
	Consistency          string
	// Items is the number of checks in one check-bulk call.
	Items int
	// Limit caps lookups' and reads' results (0: no limit for lookups, 100 for reads).
	Limit int
	// Operation is a write's: touch (default) or create.
	Operation string
	Line      int
}

// Phase is a stretch of time under one load model.
type Phase struct {
	Name string
	// Warmup phases run but are left out of the results.
	Warmup   bool
	Duration time.Duration
	Load     LoadModel
	Line     int
}

// LoadModel is closed (InFlight requests at all times) or open (arrivals per second,
// independent of how fast the server answers; arrivals no free worker can take are
// dropped and counted).
type LoadModel struct {
	Open bool
	// InFlight is the closed model's concurrency.
	InFlight int
	// Stages ramp the open model's rate linearly from StartRate; a constant rate is one
	// stage holding it.
	StartRate float64
	Stages    []Stage
	// MaxInFlight is how many workers the open model has (k6's preAllocatedVUs).
	MaxInFlight int
}

// Stage ramps an open model's rate to Target over Duration.
type Stage struct {
	Target   float64
	Duration time.Duration
}

// ParseWorkload parses a workload file. Every error names its line.
func ParseWorkload(src []byte) (*Workload, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(src, &doc); err != nil {
		return nil, fmt.Errorf("workload is not valid YAML: %w", err)
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
		return nil, errors.New("workload file is empty")
	}
	top, err := newObject(doc.Content[0], "workload", "name", "users", "dataset", "generators", "steps", "phases")
	if err != nil {
		return nil, err
	}
	w := &Workload{Name: top.str("name", "workload"), Users: top.integer("users", 0), Generators: map[string]Generator{}}
	if top.err != nil {
		return nil, top.err
	}
	for _, parse := range []func(*object) error{w.parseDataset, w.parseGenerators, w.parseSteps, w.parsePhases} {
		if err := parse(top); err != nil {
			return nil, err
		}
		if top.err != nil {
			return nil, top.err
		}
	}
	return w, w.SetUsers(w.Users)
}

// SetUsers sizes every generator that did not name its own n, and checks them.
func (w *Workload) SetUsers(n int) error {
	w.Users = n
	for name, g := range w.Generators {
		if !g.sized {
			g.Spec.N = n
			if g.Scale > 0 && n > 0 {
				g.Spec.N = max(1, int(math.Round(g.Scale*float64(n))))
			}
		}
		if err := g.Spec.Validate(); err != nil {
			if !g.sized && n <= 0 {
				return fmt.Errorf("generator %q has no n and the workload no users: set one of them or --users", name)
			}
			return fmt.Errorf("generator %q: %w", name, err)
		}
		w.Generators[name] = g
	}
	return nil
}

func (w *Workload) parseDataset(top *object) error {
	n, ok := top.fields["dataset"]
	if !ok {
		return nil
	}
	o, err := newObject(n, "dataset", "name", "seed")
	if err != nil {
		return err
	}
	w.Dataset = &DatasetSpec{Name: o.str("name", ""), Seed: uint64(o.integer("seed", 1))}
	if w.Dataset.Name == "" {
		return errAt(n, "dataset needs a name (social, permify or deepgroups)")
	}
	return o.err
}

func (w *Workload) parseGenerators(top *object) error {
	n, ok := top.fields["generators"]
	if !ok {
		return nil
	}
	if n.Kind != yaml.MappingNode {
		return errAt(n, "generators must be a mapping of name: {dist: ...}")
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		name, body := n.Content[i].Value, n.Content[i+1]
		o, err := newObject(body, fmt.Sprintf("generator %q", name), "dist", "n", "s", "alpha", "factor", "seed", "reuse", "scale")
		if err != nil {
			return err
		}
		g := Generator{Spec: dist.Spec{
			Kind: o.str("dist", dist.Uniform), N: o.integer("n", 0), S: o.float("s", 0),
			Alpha: o.float("alpha", 0), Factor: o.float("factor", 0), Seed: uint64(o.integer("seed", 1)),
		}, Reuse: o.float("reuse", 0), Scale: o.float("scale", 0), sized: o.has("n")}
		if o.err != nil {
			return o.err
		}
		if o.has("scale") && (g.sized || !(g.Scale > 0)) {
			return errAt(o.at("scale"), "generator %q: scale must be > 0 and sizes a generator without n, got %g", name, g.Scale)
		}
		probe := g.Spec
		probe.N = max(probe.N, 1)
		if err := probe.Validate(); err != nil {
			return errAt(body, "generator %q: %v", name, err)
		}
		if g.Reuse < 0 || g.Reuse >= 1 {
			return errAt(o.at("reuse"), "generator %q: reuse must be in [0, 1), got %g", name, g.Reuse)
		}
		w.Generators[name] = g
	}
	return nil
}

func (w *Workload) parseSteps(top *object) error {
	items := top.seq("steps")
	if len(items) == 0 && top.err == nil {
		return errAt(top.at("steps"), "workload needs at least one step under steps:")
	}
	for _, n := range items {
		s, err := w.parseStep(n)
		if err != nil {
			return err
		}
		if slices.ContainsFunc(w.Steps, func(o Step) bool { return o.Name == s.Name }) {
			return errAt(n, "step name %q is used twice", s.Name)
		}
		w.Steps = append(w.Steps, s)
	}
	return nil
}

func (w *Workload) parseStep(n *yaml.Node) (Step, error) {
	o, err := newObject(n, "step", "name", "type", "weight", "resource", "subject", "permission",
		"relation", "consistency", "items", "limit", "operation")
	if err != nil {
		return Step{}, err
	}
	s := Step{
		Name: o.str("name", ""), Type: o.str("type", ""), Weight: o.integer("weight", 1),
		Permission: o.str("permission", ""), Relation: o.str("relation", ""),
		Consistency: o.str("consistency", "minimize_latency"), Items: o.integer("items", 0),
		Limit: o.integer("limit", 0), Operation: o.str("operation", "touch"), Line: n.Line,
	}
	if o.err != nil {
		return s, o.err
	}
	if s.Name == "" {
		return s, errAt(n, "step needs a name")
	}
	o.what = fmt.Sprintf("step %q", s.Name)
	if !slices.Contains(stepTypes, s.Type) {
		return s, errAt(o.at("type"), "%s: type %q is not one of %v", o.what, s.Type, stepTypes)
	}
	if s.Weight < 0 {
		return s, errAt(o.at("weight"), "%s: weight must be >= 0, got %d", o.what, s.Weight)
	}
	if !slices.Contains(consistencies, s.Consistency) {
		return s, errAt(o.at("consistency"), "%s: consistency %q is not one of %v", o.what, s.Consistency, consistencies)
	}
	if err := w.stepTemplates(o, &s); err != nil {
		return s, err
	}
	return s, w.stepFields(o, &s)
}

// stepTemplates parses the resource and subject templates a step's type needs.
func (w *Workload) stepTemplates(o *object, s *Step) error {
	for _, f := range []struct {
		key      string
		dst      *Template
		typeOnly bool
	}{
		{"resource", &s.Resource, s.Type == StepLookupResources},
		{"subject", &s.Subject, s.Type == StepLookupSubjects},
	} {
		v, ok := o.scalar(f.key)
		if !ok {
			if o.err != nil {
				return o.err
			}
			if f.key == "subject" && s.Type == StepRead {
				continue // reads filter by resource only
			}
			return errAt(o.node, "%s needs a %s", o.what, f.key)
		}
		t, err := ParseTemplate(v.Value, f.typeOnly)
		if err != nil {
			return errAt(v, "%s: %s: %v", o.what, f.key, err)
		}
		if t.Generator != "" {
			if _, ok := w.Generators[t.Generator]; !ok {
				return errAt(v, "%s: %s uses generator {%s}, which generators: does not define", o.what, f.key, t.Generator)
			}
		}
		*f.dst = t
	}
	return nil
}

// stepFields checks the fields that depend on the step's type.
func (w *Workload) stepFields(o *object, s *Step) error {
	switch s.Type {
	case StepCheck, StepCheckBulk, StepLookupResources, StepLookupSubjects:
		if s.Permission == "" {
			return errAt(o.node, "%s: a %s step needs a permission", o.what, s.Type)
		}
	default:
		if s.Relation == "" && s.Type != StepRead {
			return errAt(o.node, "%s: a %s step needs a relation", o.what, s.Type)
		}
	}
	if s.Type == StepCheckBulk && s.Items <= 0 {
		s.Items = 10
	}
	if s.Items < 0 || s.Limit < 0 {
		return errAt(o.node, "%s: items and limit must be >= 0", o.what)
	}
	if s.Type == StepRead && s.Limit == 0 {
		s.Limit = 100
	}
	if s.Operation != "touch" && s.Operation != "create" {
		return errAt(o.at("operation"), "%s: operation %q must be touch or create", o.what, s.Operation)
	}
	return nil
}
