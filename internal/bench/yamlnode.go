package bench

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// lineError is a workload file error at a line, so that every message says where.
type lineError struct {
	line int
	msg  string
}

func (e *lineError) Error() string { return fmt.Sprintf("line %d: %s", e.line, e.msg) }

func errAt(n *yaml.Node, format string, args ...any) error {
	return &lineError{line: n.Line, msg: fmt.Sprintf(format, args...)}
}

// object is a YAML mapping whose fields are read one by one; every read and every
// unknown key yields an error naming its line.
type object struct {
	node   *yaml.Node
	what   string // "step \"check\"", for messages
	fields map[string]*yaml.Node
	keys   map[string]*yaml.Node
	err    error // the first error met, guarded by nothing: one goroutine parses
}

func newObject(n *yaml.Node, what string, known ...string) (*object, error) {
	if n.Kind != yaml.MappingNode {
		return nil, errAt(n, "%s must be a mapping (key: value lines)", what)
	}
	o := &object{node: n, what: what, fields: map[string]*yaml.Node{}, keys: map[string]*yaml.Node{}}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if !slices.Contains(known, k.Value) {
			return nil, errAt(k, "%s has unknown key %q (known: %s)", what, k.Value, strings.Join(known, ", "))
		}
		if _, dup := o.fields[k.Value]; dup {
			return nil, errAt(k, "%s repeats key %q", what, k.Value)
		}
		o.fields[k.Value], o.keys[k.Value] = v, k
	}
	return o, nil
}

func (o *object) fail(err error) {
	if o.err == nil {
		o.err = err
	}
}

// at is the line to blame for key: its value's, or the mapping's when it is missing.
func (o *object) at(key string) *yaml.Node {
	if v, ok := o.fields[key]; ok {
		return v
	}
	return o.node
}

func (o *object) has(key string) bool { _, ok := o.fields[key]; return ok }

func (o *object) scalar(key string) (*yaml.Node, bool) {
	v, ok := o.fields[key]
	if !ok {
		return nil, false
	}
	if v.Kind != yaml.ScalarNode {
		o.fail(errAt(v, "%s: %s must be a single value", o.what, key))
		return nil, false
	}
	return v, true
}

func (o *object) str(key, def string) string {
	if v, ok := o.scalar(key); ok {
		return v.Value
	}
	return def
}

func (o *object) integer(key string, def int) int {
	v, ok := o.scalar(key)
	if !ok {
		return def
	}
	i, err := strconv.Atoi(strings.ReplaceAll(v.Value, "_", ""))
	if err != nil {
		o.fail(errAt(v, "%s: %s must be a whole number, got %q", o.what, key, v.Value))
	}
	return i
}

func (o *object) float(key string, def float64) float64 {
	v, ok := o.scalar(key)
	if !ok {
		return def
	}
	f, err := strconv.ParseFloat(strings.ReplaceAll(v.Value, "_", ""), 64)
	if err != nil {
		o.fail(errAt(v, "%s: %s must be a number, got %q", o.what, key, v.Value))
	}
	return f
}

func (o *object) boolean(key string) bool {
	v, ok := o.scalar(key)
	if !ok {
		return false
	}
	b, err := strconv.ParseBool(v.Value)
	if err != nil {
		o.fail(errAt(v, "%s: %s must be true or false, got %q", o.what, key, v.Value))
	}
	return b
}

func (o *object) duration(key string) time.Duration {
	v, ok := o.scalar(key)
	if !ok {
		return 0
	}
	d, err := time.ParseDuration(v.Value)
	if err != nil || d < 0 {
		o.fail(errAt(v, "%s: %s must be a duration like 30s or 2m, got %q", o.what, key, v.Value))
	}
	return d
}

func (o *object) seq(key string) []*yaml.Node {
	v, ok := o.fields[key]
	if !ok {
		return nil
	}
	if v.Kind != yaml.SequenceNode {
		o.fail(errAt(v, "%s: %s must be a list", o.what, key))
		return nil
	}
	return v.Content
}
