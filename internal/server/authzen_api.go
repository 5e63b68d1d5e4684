package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	openfgav1 "github.com/openfga/api/proto/openfga/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/latch-authz/latch/internal/engine"
	"github.com/latch-authz/latch/internal/fga"
	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/server/authzen"
	"github.com/latch-authz/latch/internal/server/openfga"
)

// withAuthZEN serves the AuthZEN Authorization API beside next on the same listener:
// /access/v1/... over this server's store (the data the SpiceDB and Permify APIs
// serve), read at the newest revision the quantization window allows, the same API
// over each OpenFGA store under /stores/{store_id}/access/v1/... (unless OpenFGA's API
// is off), and the metadata documents at /.well-known/authzen-configuration, which
// needs no key, and /.well-known/authzen-configuration/{store_id}; nothing when
// AuthZENDisabled.
func (s *Server) withAuthZEN(next http.Handler) http.Handler {
	if s.cfg.AuthZENDisabled {
		return next
	}
	cfg := authzen.Config{
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
	}
	if s.fga != nil {
		cfg.Store, cfg.StoreStatus = s.fgaStoreData, openfga.HTTPStatus
	}
	api := authzen.New(cfg)
	h, guarded := s.timeAuthZEN(api), s.timeAuthZEN(s.adm.guard(authzenSurface, api))
	mux := http.NewServeMux()
	mux.Handle("/access/v1/", guarded)
	mux.Handle(authzen.WellKnown, h)
	if s.fga != nil {
		mux.Handle("/stores/{store_id}/access/v1/", guarded)
		mux.Handle(authzen.WellKnown+"/", h)
	}
	mux.Handle("/", next)
	return mux
}

// fgaStoreData opens an OpenFGA store for AuthZEN: its latest model, read as OpenFGA
// reads without a consistency preference, with OpenFGA's rules: its type and id
// syntax, a condition missing a parameter failing the evaluation rather than denying
// it, searches answered as ListObjects and ListUsers answer (cycles resolved), and
// OpenFGA's errors with the HTTP statuses OpenFGA's API gives them.
func (s *Server) fgaStoreData(ctx context.Context, id string) (authzen.Data, error) {
	snap, err := s.fga.Store(ctx, id, "", openfgav1.ConsistencyPreference_UNSPECIFIED)
	if err != nil {
		return authzen.Data{}, err
	}
	return authzen.Data{
		Engine: snap.Engine, Reader: snap.Reader, Schema: snap.Model.Schema,
		ValidType: func(typ string) error {
			if _, err := fga.ParseObject(typ + ":x"); err != nil {
				return fmt.Errorf("%q is not an OpenFGA type name", typ)
			}
			return nil
		},
		ValidID: func(id string) error {
			if _, err := fga.ParseObject("x:" + id); err != nil {
				return fmt.Errorf("%q is not an OpenFGA object id (at most 256 bytes, without whitespace, '#' or ':')", id)
			}
			return nil
		},
		Allowed: fga.Allowed,
		Status:  openfga.HTTPStatus,
		ListResources: func(ctx context.Context, req engine.LookupResourcesRequest) ([]string, error) {
			return fga.ListObjects(ctx, snap.Engine, snap.Model, snap.Reader, req)
		},
		ListSubjects: func(ctx context.Context, req engine.LookupSubjectsRequest) ([]string, error) {
			filter := []*openfgav1.UserTypeFilter{{Type: req.SubjectType, Relation: req.SubjectRelation}}
			users, err := fga.ListUsers(ctx, snap.Model, snap.Reader, req.Resource, req.Permission, filter, req.Context)
			ids := make([]string, len(users))
			for i, u := range users {
				switch {
				case u.GetWildcard() != nil:
					ids[i] = rel.Wildcard
				case u.GetUserset() != nil:
					ids[i] = u.GetUserset().GetId()
				default:
					ids[i] = u.GetObject().GetId()
				}
			}
			return ids, err
		},
	}, nil
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

// timeAuthZEN records each request's time in latch_authzen_request_duration_seconds,
// by endpoint (the path after /access/v1/, or "metadata") and HTTP status; the time
// spent waiting for admission counts, and a shed request is a 429.
func (s *Server) timeAuthZEN(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w, code: http.StatusOK}
		next.ServeHTTP(sw, r)
		endpoint := "metadata"
		if _, op, ok := strings.Cut(r.URL.Path, "/access/v1/"); ok {
			endpoint = op
		}
		if !authzen.Endpoint(endpoint) && endpoint != "metadata" {
			endpoint = "other"
		}
		s.metrics.authzen.WithLabelValues(endpoint, strconv.Itoa(sw.code)).Observe(time.Since(start).Seconds())
	})
}

// statusWriter remembers the status a handler answered with.
type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	w.code = code
	w.ResponseWriter.WriteHeader(code)
}
