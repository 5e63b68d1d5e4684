package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/latch-authz/latch/internal/store"
)

// SQLState returns err's SQLSTATE code, or "" when the server did not send one.
func SQLState(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	return ""
}

// Retryable reports whether a transaction failed only because it lost a race with
// another one (serialization failure, deadlock) and may simply be run again.
func Retryable(err error) bool {
	switch SQLState(err) {
	case "40001", "40P01":
		return true
	}
	return false
}

// Unavailable reports whether err means the server cannot be reached or is going away:
// refused or broken connections, connection-class SQLSTATEs (08...), and shutdown or
// startup in progress (57P01, 57P02, 57P03). A configuration mistake (a wrong
// password, a missing database) is not unavailability.
func Unavailable(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	if code := SQLState(err); code != "" {
		return strings.HasPrefix(code, "08") || code == "57P01" || code == "57P02" || code == "57P03" || code == "53300"
	}
	var connectErr *pgconn.ConnectError
	var netErr net.Error
	switch {
	case errors.As(err, &connectErr), errors.As(err, &netErr),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return true
	}
	// pgx reports a connection it has already seen die with these plain errors.
	msg := err.Error()
	return strings.Contains(msg, "conn closed") || strings.Contains(msg, "unexpected EOF") ||
		strings.Contains(msg, "broken pipe")
}

// Classify wraps err with store.ErrUnavailable when the server cannot be reached, and
// gives context errors precedence so cancelled work reports context.Canceled.
func Classify(ctx context.Context, what string, err error) error {
	if err == nil {
		return nil
	}
	if ctxErr := ctx.Err(); ctxErr != nil && !errors.Is(err, ctxErr) {
		return fmt.Errorf("%s: %w (%v)", what, ctxErr, err)
	}
	if Unavailable(err) {
		return fmt.Errorf("%s: %w: %w", what, store.ErrUnavailable, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}
