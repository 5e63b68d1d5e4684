package fga

import (
	"errors"
	"fmt"

	openfgav1 "github.com/openfga/api/proto/openfga/v1"

	"github.com/latch-authz/latch/internal/engine"
	"github.com/latch-authz/latch/internal/schema/ir"
)

// Error is a request OpenFGA refuses, with the code it refuses it with.
type Error struct {
	Code openfgav1.ErrorCode
	Msg  string
}

func (e *Error) Error() string { return e.Msg }

func newError(code openfgav1.ErrorCode, format string, args ...any) *Error {
	return &Error{Code: code, Msg: fmt.Sprintf(format, args...)}
}

// tupleError refuses a tuple, naming it as OpenFGA does.
func tupleError(tk *openfgav1.TupleKey, format string, args ...any) *Error {
	return newError(openfgav1.ErrorCode_invalid_tuple, "Invalid tuple '%s#%s@%s'. Reason: %s",
		tk.GetObject(), tk.GetRelation(), tk.GetUser(), fmt.Sprintf(format, args...))
}

// ErrorCode returns OpenFGA's error code for an error of this package or of the
// engine under OpenFGA's semantics, and 0 for one OpenFGA reports as internal.
func ErrorCode(err error) openfgav1.ErrorCode {
	var fe *Error
	var missing *engine.MissingParamsError
	var caveatErr *engine.CaveatEvalError
	var unknownDef *ir.UnknownDefinitionError
	var unknownRel *ir.UnknownRelationError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &fe):
		return fe.Code
	case errors.Is(err, engine.ErrMaxDepth), errors.Is(err, engine.ErrTooComplex):
		return openfgav1.ErrorCode_authorization_model_resolution_too_complex
	case errors.As(err, &missing), errors.As(err, &caveatErr):
		return openfgav1.ErrorCode_validation_error
	case errors.As(err, &unknownDef):
		return openfgav1.ErrorCode_type_not_found
	case errors.As(err, &unknownRel):
		return openfgav1.ErrorCode_relation_not_found
	}
	return 0
}

// Allowed turns a check's answer into OpenFGA's: a conditional answer (a condition
// missing parameters) is an error.
func Allowed(res engine.Result) (bool, error) {
	switch res.Membership {
	case engine.HasPermission:
		return true, nil
	case engine.Conditional:
		return false, &engine.MissingParamsError{Missing: res.Missing}
	}
	return false, nil
}
