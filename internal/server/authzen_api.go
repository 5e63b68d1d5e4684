package server

import (
	"context"
	"errors"
	"net/http"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/latch-authz/latch/internal/server/authzen"
)

// withAuthZEN serves the AuthZEN Authorization API beside next on the same listener:
// /access/v1/... over this server's store (the data the SpiceDB and Permify APIs
// serve), read at the newest revision the quantization window allows, and the
// metadata document at /.well-known/authzen-configuration, which needs no key.
func (s *Server) withAuthZEN(next http.Handler) http.Handler {
	h := authzen.New(authzen.Config{
		Main: func(ctx context.Context) (authzen.Data, error) {
			r, sch, err := s.readerAndSchema(ctx, nil)
			if err != nil {
				return authzen.Data{}, err
			}
			return authzen.Data{Engine: s.engine, Reader: r, Schema: sch}, nil
		},
		Authorize: func(r *http.Request) error {
			md := metadata.Pairs("authorization", r.Header.Get("Authorization"))
			err := s.auth.check(metadata.NewIncomingContext(r.Context(), md))
			switch st := status.Convert(err); {
			case err == nil:
				return nil
			case st.Code() == codes.Unauthenticated:
				return errors.New("the Authorization header is not `Bearer <preshared key>`")
			default:
				return errors.New(st.Message())
			}
		},
		Status:         s.httpStatus,
		MaxEvaluations: s.cfg.MaxChecksPerBulk,
	})
	guarded := s.adm.guard(authzenSurface, h)
	mux := http.NewServeMux()
	mux.Handle("/access/v1/", guarded)
	mux.Handle(authzen.WellKnown, h)
	mux.Handle("/", next)
	return mux
}

// httpStatus renders err as the error table classifies it, as an HTTP status and the
// message the gRPC API would send.
func (s *Server) httpStatus(err error) (int, string) {
	st := status.Convert(s.status(err))
	return runtime.HTTPStatusFromCode(st.Code()), st.Message()
}

// authzenSurface admits searches (lookups) as expensive calls and evaluations as cheap
// ones; a refusal is AuthZEN's error shape, a message, with 429.
var authzenSurface = httpSurface{
	classOf: func(r *http.Request) admissionClass {
		if authzen.Expensive(r.URL.Path) {
			return classExpensive
		}
		return classCheap
	},
	overloaded: func(w http.ResponseWriter, err *overloadError) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = w.Write([]byte(err.Error() + "\n"))
	},
}
