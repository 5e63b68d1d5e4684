package cli

import (
	"fmt"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// rpcError is a failed call to the server, rendered as what was being done, the
// server's message and the gRPC code, plus a hint for the codes a person can fix.
type rpcError struct {
	op       string
	endpoint string
	code     codes.Code
	msg      string
}

func (e *rpcError) Error() string {
	return fmt.Sprintf("%s: %s (%s)%s", e.op, e.msg, e.code, e.hint())
}

// hint says what to do about the error, where the code and message tell.
func (e *rpcError) hint() string {
	switch {
	case e.code == codes.Unauthenticated, e.code == codes.PermissionDenied && strings.Contains(e.msg, "preshared key"):
		return "; pass the server's preshared key with --token or LATCH_TOKEN (latch serve prints the key it uses)"
	case e.code == codes.Unavailable:
		return e.unavailableHint()
	}
	return ""
}

// unavailableHint tells apart the ways a call finds no server: nothing listening, a
// listener that speaks something else (TLS, or HTTP/1), and a server that answered
// UNAVAILABLE itself (its datastore is down: its message says so, and needs no hint).
func (e *rpcError) unavailableHint() string {
	msg := e.msg
	switch {
	case !strings.Contains(msg, "connection error"):
		return "" // the server's own answer
	case strings.Contains(msg, "first record does not look like a TLS handshake"):
		return fmt.Sprintf("; %s speaks plaintext: connect without --tls", e.endpoint)
	case strings.Contains(msg, "authentication handshake failed"), strings.Contains(msg, "certificate"):
		return fmt.Sprintf("; the TLS handshake with %s failed: check --ca-path and the server's certificate", e.endpoint)
	case strings.Contains(msg, "server preface"), strings.Contains(msg, "http2"):
		return fmt.Sprintf("; %s does not speak plaintext gRPC: if it serves TLS, add --tls; if it is latch's HTTP gateway port (8443 by default), point --endpoint at the gRPC port (50051 by default)", e.endpoint)
	}
	return fmt.Sprintf("; is a latch server running at %s? (set --endpoint or LATCH_ENDPOINT)", e.endpoint)
}

// rpcFailed wraps an error returned by a gRPC call.
func rpcFailed(op, endpoint string, err error) error {
	st, ok := status.FromError(err)
	if !ok {
		return fmt.Errorf("%s: %w", op, err)
	}
	return &rpcError{op: op, endpoint: endpoint, code: st.Code(), msg: st.Message()}
}
