package server

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"log/slog"
	"runtime/debug"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// Interceptors run outermost first: recover (so nothing below can take the process
// down), then auth (so unauthenticated callers learn nothing about request shape),
// then request validation.

// recoverUnary turns a panic in a handler into INTERNAL and logs it with its stack.
// It is the last line of defence: handlers are written not to panic.
func recoverUnary(log *slog.Logger) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (resp any, err error) {
		defer func() {
			if p := recover(); p != nil {
				err = panicStatus(log, info.FullMethod, p)
			}
		}()
		return handler(ctx, req)
	}
}

func recoverStream(log *slog.Logger) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) (err error) {
		defer func() {
			if p := recover(); p != nil {
				err = panicStatus(log, info.FullMethod, p)
			}
		}()
		return handler(srv, ss)
	}
}

func panicStatus(log *slog.Logger, method string, p any) error {
	log.Error("panic in request handler", "method", method, "panic", p, "stack", string(debug.Stack()))
	return status.Error(codes.Internal, "internal error")
}

// authenticator checks preshared bearer keys. Keys are compared as SHA-256 digests in
// constant time, so neither a key's bytes nor its length leak through timing.
type authenticator struct {
	digests [][sha256.Size]byte
}

func newAuthenticator(keys []string) *authenticator {
	a := &authenticator{}
	for _, k := range keys {
		a.digests = append(a.digests, sha256.Sum256([]byte(k)))
	}
	return a
}

// matches reports, in time independent of where they differ, whether token is one of
// the keys.
func (a *authenticator) matches(token string) bool {
	got := sha256.Sum256([]byte(strings.TrimSpace(token)))
	match := 0
	for _, d := range a.digests {
		match |= subtle.ConstantTimeCompare(got[:], d[:])
	}
	return match == 1
}

// exempt lists method prefixes served without a key: probes and tooling discovery,
// which SpiceDB also serves without one.
var exempt = []string{"/grpc.health.v1.Health/", "/grpc.reflection."}

func isExempt(method string) bool {
	for _, p := range exempt {
		if strings.HasPrefix(method, p) {
			return true
		}
	}
	return false
}

// check returns UNAUTHENTICATED without a bearer key and PERMISSION_DENIED with a
// wrong one, as SpiceDB does.
func (a *authenticator) check(ctx context.Context) error {
	vals := metadata.ValueFromIncomingContext(ctx, "authorization") // no copy of all the metadata
	if len(vals) == 0 {
		return status.Error(codes.Unauthenticated, "missing authorization: send the header `authorization: Bearer <preshared key>`")
	}
	scheme, token, ok := strings.Cut(strings.TrimSpace(vals[0]), " ")
	if !ok || !strings.EqualFold(scheme, "bearer") || strings.TrimSpace(token) == "" {
		return status.Error(codes.Unauthenticated, "authorization is not a bearer token: send `authorization: Bearer <preshared key>`")
	}
	if !a.matches(token) {
		return status.Error(codes.PermissionDenied, "invalid preshared key")
	}
	return nil
}

func (a *authenticator) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if !isExempt(info.FullMethod) {
		if err := a.check(ctx); err != nil {
			return nil, err
		}
	}
	return handler(ctx, req)
}

func (a *authenticator) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	if !isExempt(info.FullMethod) {
		if err := a.check(ss.Context()); err != nil {
			return err
		}
	}
	return handler(srv, ss)
}

// generateKey returns a random preshared key for a server started without one.
func generateKey() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	return base64.RawURLEncoding.EncodeToString(b)
}

// validateMessage runs the generated protoc-gen-validate rules and authzed-go's
// hand-written ones on a request.
func validateMessage(m any) error {
	if v, ok := m.(interface{ Validate() error }); ok {
		if err := v.Validate(); err != nil {
			return status.Error(codes.InvalidArgument, err.Error())
		}
	}
	if v, ok := m.(interface{ HandwrittenValidate() error }); ok {
		if err := v.HandwrittenValidate(); err != nil {
			return status.Error(codes.InvalidArgument, err.Error())
		}
	}
	return nil
}

func validateUnary(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if err := validateMessage(req); err != nil {
		return nil, err
	}
	return handler(ctx, req)
}

func validateStream(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	return handler(srv, &validatingStream{ServerStream: ss})
}

// validatingStream validates each message the handler receives.
type validatingStream struct{ grpc.ServerStream }

func (s *validatingStream) RecvMsg(m any) error {
	if err := s.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	return validateMessage(m)
}
