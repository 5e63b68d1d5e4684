// Package apierr is latch's one classification of domain errors: every sentinel and
// typed error of store, engine, schema, caveat and zedtoken has one row here giving
// the gRPC code and SpiceDB ErrorReason clients branch on, the ErrorInfo metadata
// SpiceDB sends with it, and the code Permify's API answers with. The SpiceDB API
// (server) and the Permify API (server/permify) only render a Class in their own
// wire shape; neither decides codes of its own for these errors.
package apierr

import (
	"context"
	"errors"
	"strconv"

	v1 "github.com/authzed/authzed-go/proto/authzed/api/v1"
	"google.golang.org/grpc/codes"

	"github.com/latch-authz/latch/internal/caveat"
	"github.com/latch-authz/latch/internal/engine"
	"github.com/latch-authz/latch/internal/schema"
	"github.com/latch-authz/latch/internal/store"
)

// Class is how one error is reported to clients.
type Class struct {
	Code    codes.Code
	Reason  v1.ErrorReason
	Meta    map[string]string // ErrorInfo metadata, under SpiceDB's keys
	Message string            // cut by Bound
	// Permify is the Permify API's ERROR_CODE_* name and code where Permify answers
	// differently from SpiceDB; the zero value means "render Code".
	Permify Permify
}

// Permify is one of Permify's error codes with the gRPC code Permify sends it with.
type Permify struct {
	Name string
	Code codes.Code
}

// Rule maps one kind of error to its class. Match returns the ErrorInfo metadata
// when err is of its kind.
type Rule struct {
	Code    codes.Code
	Reason  v1.ErrorReason
	Permify Permify
	Match   func(error) (map[string]string, bool)
}

// As matches errors of type T anywhere in the chain; meta, when not nil, gives the
// ErrorInfo metadata.
func As[T error](meta func(T) map[string]string) func(error) (map[string]string, bool) {
	return func(err error) (map[string]string, bool) {
		t, ok := errors.AsType[T](err)
		if !ok {
			return nil, false
		}
		if meta == nil {
			return nil, true
		}
		return meta(t), true
	}
}

// Is matches a sentinel error anywhere in the chain.
func Is(target error) func(error) (map[string]string, bool) {
	return func(err error) (map[string]string, bool) { return nil, errors.Is(err, target) }
}

// Classify finds err's class: first in extra (the rules an adapter keeps for errors
// it raises itself about a request), then in the domain table. ok is false for an
// error no rule knows, which an adapter reports as INTERNAL without its text.
func Classify(err error, extra []Rule) (c Class, ok bool) {
	for _, rules := range [][]Rule{extra, domain} {
		for _, r := range rules {
			meta, ok := r.Match(err)
			if !ok {
				continue
			}
			bounded := make(map[string]string, len(meta))
			for k, v := range meta {
				bounded[k] = bound(v, maxMetaValue)
			}
			return Class{Code: r.Code, Reason: r.Reason, Meta: bounded, Message: Bound(message(r, err)), Permify: r.Permify}, true
		}
	}
	return Class{}, false
}

// A message or metadata value quotes what the client sent; these bound how much of
// it comes back, so a megabyte identifier costs the server (and the client's HTTP/2
// frame limit) a few kilobytes, not a megabyte.
const (
	maxMessage   = 4096
	maxMetaValue = 1024
)

// Bound cuts an error message to a few kilobytes (on a UTF-8 boundary), saying how
// much was cut.
func Bound(s string) string { return bound(s, maxMessage) }

func bound(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	cut := limit
	for cut > 0 && !isRuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "… (" + strconv.Itoa(len(s)-cut) + " more bytes)"
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }

// message adds, where SpiceDB does, advice on what to do next.
func message(r Rule, err error) string {
	if d, ok := errors.AsType[*schema.DiagnosticsError](err); ok {
		return diagnosticsMessage(d)
	}
	if p, ok := errors.AsType[*store.PreconditionFailedError](err); ok {
		return preconditionText(p.Precondition)
	}
	if p, ok := errors.AsType[*caveat.ParamTypeError](err); ok && r.Reason == v1.ErrorReason_ERROR_REASON_CAVEAT_PARAMETER_TYPE_ERROR {
		return paramTypeText(p)
	}
	switch r.Reason {
	case v1.ErrorReason_ERROR_REASON_MAXIMUM_DEPTH_EXCEEDED:
		return err.Error() + ": this usually means the data has a cycle or nests deeper than the server's max depth"
	}
	switch {
	case errors.Is(err, engine.ErrWildcardSubject):
		return "invalid argument: " + err.Error()
	case r.Code == codes.OutOfRange:
		return "invalid zedtoken: " + err.Error()
	case errors.Is(err, store.ErrUnavailable):
		// The cause names hosts and drivers: for the operator's log, not the client.
		return "the datastore is unavailable"
	case errors.Is(err, context.Canceled):
		return "the request was cancelled"
	case errors.Is(err, context.DeadlineExceeded):
		return "the request deadline passed"
	}
	return err.Error()
}
