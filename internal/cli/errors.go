package cli

import (
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// describe renders err as the single line printed after "latch: ".
func describe(err error) string {
	var re *rpcError
	if errors.As(err, &re) {
		return re.Error()
	}
	return err.Error()
}

// rpcError is a failed call to the server, rendered as what was being done, the
// server's message and the gRPC code, plus a hint for the codes a person can fix.
type rpcError struct {
	op       string
	endpoint string
	code     codes.Code
	msg      string
}

func (e *rpcError) Error() string {
	s := fmt.Sprintf("%s: %s (%s)", e.op, e.msg, e.code)
	switch e.code {
	case codes.Unauthenticated:
		s += "; pass the server's preshared key with --token or LATCH_TOKEN (latch serve prints the key it generated)"
	case codes.Unavailable:
		s += fmt.Sprintf("; is a latch server running at %s? (set --endpoint or LATCH_ENDPOINT)", e.endpoint)
	}
	return s
}

// rpcFailed wraps an error returned by a gRPC call.
func rpcFailed(op, endpoint string, err error) error {
	st, ok := status.FromError(err)
	if !ok {
		return fmt.Errorf("%s: %w", op, err)
	}
	return &rpcError{op: op, endpoint: endpoint, code: st.Code(), msg: st.Message()}
}
