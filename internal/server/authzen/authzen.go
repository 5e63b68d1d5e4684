// Package authzen serves the OpenID AuthZEN Authorization API 1.0 over latch's engine:
// access evaluation (POST /access/v1/evaluation), access evaluations with their three
// evaluation semantics (POST /access/v1/evaluations), subject, resource and action
// search with paging (POST /access/v1/search/{subject,resource,action}) and the
// metadata document (GET /.well-known/authzen-configuration). It is an adapter: AuthZEN
// JSON in, engine checks and lookups out, decisions back.
//
// The store a request is evaluated against is a parameter: Config.Main for the paths
// above (the server's store, SpiceDB's and Permify's data), and Config.Store for the same
// API under /stores/{store_id}/ (OpenFGA stores, as OpenFGA serves AuthZEN). The mapping:
//
//   - subject {type, id} is the subject type:id; a subject set is written "id#relation"
//     or with properties.relation;
//   - resource {type, id} is the resource type:id;
//   - action {name} is a permission or relation of the resource's definition;
//   - context is the caveat context, to which the properties of subject, resource and
//     action are added as subject_<name>, resource_<name> and action_<name>.
package authzen

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"

	"github.com/latch-authz/latch/internal/engine"
	"github.com/latch-authz/latch/internal/schema/ir"
	"github.com/latch-authz/latch/internal/store"
)

// Data is what one request is evaluated against: a store's reader at the revision the
// request reads, the schema there, and the engine that evaluates it.
type Data struct {
	Engine *engine.Engine
	Reader store.Reader
	Schema *ir.Schema
	// ValidType and ValidID check a type name and an object id; nil applies SpiceDB's
	// rules (rel.ValidateType, rel.ValidateObjectID).
	ValidType, ValidID func(string) error
	// Allowed turns a check's result into a decision; nil is latch's: a result that
	// depends on caveat context the request did not send is a denial, with the missing
	// names in its context. An error fails the evaluation.
	Allowed func(engine.Result) (bool, error)
	// Status maps the errors of this data's checks and lookups to an HTTP status and a
	// message; nil is Config.Status.
	Status func(error) (int, string)
	// ListResources and ListSubjects, when set, answer searches in place of the
	// engine's paged lookups: every id that has the permission ("*" for a wildcard
	// subject), in any order, each granted under the data's own rules.
	ListResources func(context.Context, engine.LookupResourcesRequest) ([]string, error)
	ListSubjects  func(context.Context, engine.LookupSubjectsRequest) ([]string, error)
}

// Config is what the handler needs from the server.
type Config struct {
	// Main opens the data /access/v1/... evaluates against.
	Main func(ctx context.Context) (Data, error)
	// Store opens the data of the store /stores/{store_id}/access/v1/... names (an
	// unknown id is an error, answered as StoreStatus maps it); nil serves no
	// per-store paths.
	Store func(ctx context.Context, id string) (Data, error)
	// StoreStatus maps Store's errors (an unknown store) to an HTTP status and a
	// message; nil is Status.
	StoreStatus func(error) (int, string)
	// Authorize checks a request's credentials; nil serves everyone. A refusal is
	// answered 401 without an Authorization header, else 403 with the error's text.
	Authorize func(*http.Request) error
	// Status maps an error the engine or a store returned to an HTTP status and a
	// message for the client.
	Status func(error) (int, string)
	// MaxEvaluations bounds the evaluations of one access evaluations request.
	MaxEvaluations int
}

// Handler serves the AuthZEN API.
type Handler struct {
	cfg Config
	mux *http.ServeMux
}

// New returns a handler serving cfg's stores.
func New(cfg Config) *Handler {
	h := &Handler{cfg: cfg, mux: http.NewServeMux()}
	h.mux.HandleFunc("GET "+WellKnown, h.metadata)
	for path, op := range h.operations() {
		h.mux.HandleFunc("POST /access/v1/"+path, h.serve(op, nil))
	}
	if cfg.Store != nil {
		// OpenFGA's path for a store's document, and the one AuthZEN derives from the
		// store's PDP identifier (https://host/stores/ID: the well-known path goes
		// between the host and the identifier's path).
		h.mux.HandleFunc("GET "+WellKnown+"/{store_id}", h.metadata)
		h.mux.HandleFunc("GET "+WellKnown+"/stores/{store_id}", h.metadata)
		for path, op := range h.operations() {
			h.mux.HandleFunc("POST /stores/{store_id}/access/v1/"+path, h.serve(op, cfg.Store))
		}
	}
	return h
}

// WellKnown is the path of the metadata document.
const WellKnown = "/.well-known/authzen-configuration"

// Expensive says whether a request to path is a search (a lookup, admitted as the
// server's expensive calls) rather than an evaluation.
func Expensive(path string) bool {
	return strings.Contains(path, "/access/v1/search/")
}

// Endpoint says whether name is one of the API's endpoints under /access/v1/.
func Endpoint(name string) bool {
	switch name {
	case "evaluation", "evaluations", "search/subject", "search/resource", "search/action":
		return true
	}
	return false
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.mux.ServeHTTP(w, r) }

// operation answers one decoded request body against d.
type operation func(ctx context.Context, d Data, body []byte) (any, error)

func (h *Handler) operations() map[string]operation {
	return map[string]operation{
		"evaluation":      h.evaluation,
		"evaluations":     h.evaluations,
		"search/subject":  h.searchSubject,
		"search/resource": h.searchResource,
		"search/action":   h.searchAction,
	}
}

// serve authorizes the request, reads its body, opens its store's data and writes the
// operation's answer as JSON.
func (h *Handler) serve(op operation, perStore func(context.Context, string) (Data, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !h.authorized(w, r) {
			return
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			h.writeError(w, h.cfg.Status, badRequest("reading the request body: %v", err))
			return
		}
		var d Data
		status := h.cfg.Status
		if perStore != nil {
			d, err = perStore(r.Context(), r.PathValue("store_id"))
			status = h.storeStatus()
		} else {
			d, err = h.cfg.Main(r.Context())
		}
		if err != nil {
			h.writeError(w, status, err)
			return
		}
		out, err := op(r.Context(), d, body)
		if err != nil {
			h.writeError(w, d.errorStatus(h.cfg.Status), err)
			return
		}
		writeJSON(w, http.StatusOK, out)
	}
}

// authorized answers 401 or 403 for a request without valid credentials.
func (h *Handler) authorized(w http.ResponseWriter, r *http.Request) bool {
	if h.cfg.Authorize == nil {
		return true
	}
	err := h.cfg.Authorize(r)
	if err == nil {
		return true
	}
	if r.Header.Get("Authorization") == "" {
		w.Header().Set("WWW-Authenticate", "Bearer")
		writeText(w, http.StatusUnauthorized, "missing credentials: send the header `Authorization: Bearer <preshared key>`")
		return false
	}
	writeText(w, http.StatusForbidden, "invalid credentials: "+err.Error())
	return false
}

// metadata serves the PDP metadata document: absolute URLs of the endpoints, under
// the store's path for a per-store document.
func (h *Handler) metadata(w http.ResponseWriter, r *http.Request) {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	base := scheme + "://" + r.Host
	if id := r.PathValue("store_id"); id != "" {
		if !h.authorized(w, r) {
			return
		}
		if _, err := h.cfg.Store(r.Context(), id); err != nil {
			h.writeError(w, h.storeStatus(), err)
			return
		}
		base += "/stores/" + id
	}
	writeJSON(w, http.StatusOK, map[string]string{
		"policy_decision_point":       base,
		"access_evaluation_endpoint":  base + "/access/v1/evaluation",
		"access_evaluations_endpoint": base + "/access/v1/evaluations",
		"search_subject_endpoint":     base + "/access/v1/search/subject",
		"search_resource_endpoint":    base + "/access/v1/search/resource",
		"search_action_endpoint":      base + "/access/v1/search/action",
	})
}

// requestError is a request the API refuses as the client's fault, naming the field.
type requestError struct{ msg string }

func (e *requestError) Error() string { return e.msg }

// writeError answers err: a request error 400, anything else as status maps it.
// AuthZEN's error body is a message string.
func (h *Handler) writeError(w http.ResponseWriter, status func(error) (int, string), err error) {
	if re, ok := errors.AsType[*requestError](err); ok {
		writeText(w, http.StatusBadRequest, re.msg)
		return
	}
	code, msg := status(err)
	writeText(w, code, msg)
}

// storeStatus maps the errors of opening a store.
func (h *Handler) storeStatus() func(error) (int, string) {
	if h.cfg.StoreStatus != nil {
		return h.cfg.StoreStatus
	}
	return h.cfg.Status
}

// errorStatus is d's error mapping, else def.
func (d Data) errorStatus(def func(error) (int, string)) func(error) (int, string) {
	if d.Status != nil {
		return d.Status
	}
	return def
}

func writeText(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, msg+"\n")
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
