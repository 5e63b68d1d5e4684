package cluster

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/latch-authz/latch/internal/caveat"
	"github.com/latch-authz/latch/internal/engine"
	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/store"
)

// The dispatch service speaks gRPC with messages of its own: a subproblem is a handful
// of strings and numbers, written here as length-prefixed fields in a fixed order.
// Only latch nodes of one version talk to each other over it, so it carries no field
// numbers; the version is in the service's name.
const (
	serviceName = "latch.cluster.v1.Dispatch"
	checkMethod = "/" + serviceName + "/Check"
	// healthMethod answers an empty message with an empty one to a caller with the
	// cluster's key: a down peer is probed with it.
	healthMethod = "/" + serviceName + "/Health"
)

// frame is a message as bytes; the codec passes it through unchanged.
type frame []byte

// codec is the dispatch service's gRPC codec: the messages encode themselves.
type codec struct{}

func (codec) Name() string { return "latch-dispatch" }

func (codec) Marshal(v any) ([]byte, error) {
	f, ok := v.(*frame)
	if !ok {
		return nil, fmt.Errorf("dispatch codec cannot marshal %T", v)
	}
	return *f, nil
}

func (codec) Unmarshal(data []byte, v any) error {
	f, ok := v.(*frame)
	if !ok {
		return fmt.Errorf("dispatch codec cannot unmarshal into %T", v)
	}
	*f = append((*f)[:0], data...)
	return nil
}

func appendString(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

// encodeSubproblem writes sp in the request's field order.
func encodeSubproblem(sp *engine.Subproblem) frame {
	n := 32 + len(sp.ResourceType) + len(sp.Relation) + len(sp.Subject.Object.Type) + len(sp.Subject.Object.ID) + len(sp.Subject.Relation) + len(sp.Context)
	for _, id := range sp.ResourceIDs {
		n += len(id) + 2
	}
	b := make([]byte, 0, n)
	b = binary.AppendUvarint(b, uint64(sp.Revision))
	b = appendString(b, sp.ResourceType)
	b = appendString(b, sp.Relation)
	b = appendString(b, sp.Subject.Object.Type)
	b = appendString(b, sp.Subject.Object.ID)
	b = appendString(b, sp.Subject.Relation)
	b = appendString(b, string(sp.Context))
	b = binary.AppendUvarint(b, uint64(sp.Depth))
	b = binary.AppendUvarint(b, uint64(len(sp.ResourceIDs)))
	for _, id := range sp.ResourceIDs {
		b = appendString(b, id)
	}
	return b
}

// encodeAnswers writes a's states (with the missing parameters of conditional ones)
// and then the work counts.
func encodeAnswers(a *engine.Answers) frame {
	b := make([]byte, 0, 8+2*len(a.States))
	b = binary.AppendUvarint(b, uint64(len(a.States)))
	for i, st := range a.States {
		b = append(b, byte(st))
		switch st {
		case engine.AnswerConditional:
			b = binary.AppendUvarint(b, uint64(len(a.Missing[i])))
			for _, m := range a.Missing[i] {
				b = appendString(b, m)
			}
		case engine.AnswerCaveatError:
			b = appendCaveatError(b, a.Errors[i])
		}
	}
	b = binary.AppendUvarint(b, uint64(a.Dispatched))
	return binary.AppendUvarint(b, uint64(a.Cached))
}

// The kinds of caveat error an answer carries, so that the node receiving it reports
// the error its client would get from one node: the API gives a context value of the
// wrong type and a cost limit reasons of their own.
const (
	caveatErrPlain byte = iota
	caveatErrParamType
	caveatErrCost
)

// appendCaveatError writes e: its caveat, its kind and what that kind needs to be
// rebuilt with the same message.
func appendCaveatError(b []byte, e *engine.CaveatEvalError) []byte {
	b = appendString(b, e.Caveat)
	var pt *caveat.ParamTypeError
	switch {
	case errors.As(e.Err, &pt) && pt == e.Err:
		b = append(b, caveatErrParamType)
		b = appendString(appendString(appendString(b, pt.Param), pt.Type), pt.Err.Error())
		return appendString(b, pt.Caveat)
	case errors.Is(e.Err, caveat.ErrCostExceeded):
		b = append(b, caveatErrCost)
	default:
		b = append(b, caveatErrPlain)
	}
	return appendString(b, e.Err.Error())
}

// caveatError reads what appendCaveatError wrote; nil for an unknown kind.
func (r *reader) caveatError() *engine.CaveatEvalError {
	e := &engine.CaveatEvalError{Caveat: r.string()}
	if r.err != nil || len(r.b) == 0 {
		r.err = errTruncated
		return nil
	}
	kind := r.b[0]
	r.b = r.b[1:]
	switch kind {
	case caveatErrParamType:
		pt := &caveat.ParamTypeError{Param: r.string(), Type: r.string(), Err: errors.New(r.string())}
		pt.Caveat = r.string()
		e.Err = pt
	case caveatErrCost:
		e.Err = wireError{msg: r.string(), is: caveat.ErrCostExceeded}
	case caveatErrPlain:
		e.Err = errors.New(r.string())
	default:
		return nil
	}
	return e
}

// wireError is an error received from another node: its message, and the sentinel it
// wrapped there.
type wireError struct {
	msg string
	is  error
}

func (e wireError) Error() string { return e.msg }
func (e wireError) Unwrap() error { return e.is }

var errTruncated = errors.New("dispatch message is truncated")

// reader takes fields off the front of a message, remembering the first error.
type reader struct {
	b   []byte
	err error
}

func (r *reader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.err = errTruncated
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) string() string {
	n := r.uvarint()
	if r.err != nil {
		return ""
	}
	if n > uint64(len(r.b)) {
		r.err = errTruncated
		return ""
	}
	s := string(r.b[:n])
	r.b = r.b[n:]
	return s
}

// count reads a number of items that follow, each at least one byte long.
func (r *reader) count() int {
	n := r.uvarint()
	if n > uint64(len(r.b)) {
		r.err = errTruncated
		return 0
	}
	return int(n)
}

func (r *reader) done() error {
	if r.err == nil && len(r.b) > 0 {
		r.err = fmt.Errorf("dispatch message has %d bytes past its end", len(r.b))
	}
	return r.err
}

func decodeSubproblem(b []byte) (*engine.Subproblem, error) {
	r := reader{b: b}
	sp := &engine.Subproblem{Revision: store.Revision(r.uvarint())}
	sp.ResourceType = r.string()
	sp.Relation = r.string()
	sp.Subject = rel.SubjectRef{Object: rel.ObjectRef{Type: r.string(), ID: r.string()}, Relation: r.string()}
	if c := r.string(); c != "" {
		sp.Context = []byte(c)
	}
	sp.Depth = int(r.uvarint())
	ids := make([]string, r.count())
	for i := range ids {
		ids[i] = r.string()
	}
	sp.ResourceIDs = ids
	if err := r.done(); err != nil {
		return nil, err
	}
	return sp, nil
}

func decodeAnswers(b []byte) (*engine.Answers, error) {
	r := reader{b: b}
	n := r.count()
	a := &engine.Answers{States: make([]engine.AnswerState, n), Missing: make([][]string, n)}
	for i := range n {
		if r.err != nil || len(r.b) == 0 {
			return nil, errTruncated
		}
		st := engine.AnswerState(r.b[0])
		r.b = r.b[1:]
		if st > engine.AnswerCaveatError {
			return nil, fmt.Errorf("dispatch answer has unknown state %d", st)
		}
		a.States[i] = st
		switch st {
		case engine.AnswerConditional:
			missing := make([]string, r.count())
			for j := range missing {
				missing[j] = r.string()
			}
			a.Missing[i] = missing
		case engine.AnswerCaveatError:
			if a.Errors == nil {
				a.Errors = make([]*engine.CaveatEvalError, n)
			}
			if a.Errors[i] = r.caveatError(); a.Errors[i] == nil && r.err == nil {
				return nil, errors.New("dispatch answer has a caveat error of unknown kind")
			}
		}
	}
	a.Dispatched = int64(r.uvarint())
	a.Cached = int64(r.uvarint())
	if err := r.done(); err != nil {
		return nil, err
	}
	return a, nil
}
