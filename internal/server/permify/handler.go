// Package permify serves Permify's HTTP API (/v1/tenants/...) over latch's engine and
// stores: tenants, schemas written in Permify's language, tuples and attributes, and
// check, bulk check, lookups, subject permissions and expand. It is an adapter: wire
// JSON in, engine, store and permdata calls (Permify's data model: tuple checks,
// attribute lowering, answers), wire JSON out.
//
// Tenant t1 always exists and is the server's own store, the one the SpiceDB API
// serves; other tenants each get an isolated store from Config.Tenants. A tenant the
// SpiceDB API also serves stores its schema as the .zed rendering of the compiled form
// (see package schema/perm), so the SpiceDB API can read and evaluate it; any other
// tenant stores the Permify source (storedForm). Snap tokens and schema versions are
// zedtokens of store revisions.
package permify

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/latch-authz/latch/internal/engine"
	"github.com/latch-authz/latch/internal/schema"
	"github.com/latch-authz/latch/internal/schema/ir"
	"github.com/latch-authz/latch/internal/store"
)

// DefaultTenant is the tenant that exists from the start and shares the server's store.
const DefaultTenant = "t1"

// Config is what the handler needs from the server.
type Config struct {
	// Engine evaluates; each tenant gets a sibling of it (Engine.Sibling), so that
	// tenants share its cache without sharing answers, but for t1 when SharedDefault:
	// Engine's own answers are t1's, and its index of nested sets and its cluster's
	// dispatch serve them.
	Engine *engine.Engine
	// Default is tenant t1's store (the server's store); the handler does not close it.
	Default store.Store
	// Tenants keeps the stores of tenants created through the API; nil means tenants
	// cannot be created.
	Tenants TenantStores
	// SharedDefault says the SpiceDB API serves t1's store too, so t1's schemas are
	// stored as .zed and must follow SpiceDB's naming rules.
	SharedDefault bool
	// Authorize checks a request's credentials; nil serves everyone.
	Authorize func(*http.Request) error
	// MaxBatch bounds tuples plus attributes per data/write and checks per bulk-check
	// (Permify's default is 100; load scripts send 1,000). 0 means 10,000.
	MaxBatch int
	// MaxTenants bounds the tenants besides t1 that the API creates (0: no bound).
	MaxTenants int
	// StreamStallTimeout bounds each write of a streamed answer: a client that reads
	// nothing for this long ends its stream (0: no bound).
	StreamStallTimeout time.Duration
	// NewIndex, if not nil, starts the index of nested sets over tenant's store st
	// (t1's too unless SharedDefault, where Engine holds the server's index), whose
	// schema at a revision schemaAt compiles; stop ends its upkeep.
	NewIndex func(tenant string, st store.Store, schemaAt func(context.Context, store.Revision) (*ir.Schema, error)) (x engine.SetIndex, stop func())
}

// TenantStores opens, lists and removes the stores of tenants other than t1.
type TenantStores interface {
	// Existing returns the tenants kept from earlier runs, with their stores open.
	Existing() ([]TenantInfo, error)
	// Create makes an empty store for a new tenant.
	Create(t TenantInfo) (store.Store, error)
	// Remove deletes a tenant's data once the handler has closed its store.
	Remove(id string) error
}

// TenantInfo describes a tenant; Store is set by TenantStores.Existing.
type TenantInfo struct {
	ID, Name string
	Created  time.Time
	Store    store.Store
}

// Handler serves the Permify API. Close releases the tenant stores it opened.
type Handler struct {
	cfg     Config
	schemas *schema.Cache[*view]

	mu       sync.Mutex
	tenants  map[string]*tenant // guarded by mu
	creating map[string]bool    // guarded by mu; ids whose store is being made
	closed   bool               // guarded by mu
}

type tenant struct {
	ID, Name  string
	Created   time.Time
	store     store.Store
	engine    *engine.Engine
	stopIndex func() // ends the upkeep of the engine's index; nil without one
	owned     bool
}

// New returns a handler with tenant t1 on cfg.Default and the tenants cfg.Tenants kept.
func New(cfg Config) (*Handler, error) {
	if cfg.MaxBatch <= 0 {
		cfg.MaxBatch = 10_000
	}
	h := &Handler{cfg: cfg, schemas: newSchemaCache(), tenants: map[string]*tenant{}, creating: map[string]bool{}}
	t1 := &tenant{ID: DefaultTenant, Name: "default", Created: time.Now().UTC(), store: cfg.Default, engine: cfg.Engine}
	if !cfg.SharedDefault {
		h.setEngine(t1)
	}
	h.tenants[DefaultTenant] = t1
	if cfg.Tenants != nil {
		existing, err := cfg.Tenants.Existing()
		if err != nil {
			h.Close()
			return nil, err
		}
		for _, info := range existing {
			t := &tenant{ID: info.ID, Name: info.Name, Created: info.Created, store: info.Store, owned: true}
			h.setEngine(t)
			h.tenants[t.ID] = t
		}
	}
	return h, nil
}

// setEngine gives tenant t an engine of its own over its store, with the store's index
// of nested sets when the server keeps them.
func (h *Handler) setEngine(t *tenant) {
	if h.cfg.NewIndex == nil {
		t.engine = h.cfg.Engine.Sibling(nil)
		return
	}
	x, stop := h.cfg.NewIndex(t.ID, t.store, h.schemaOf(t.store))
	t.engine, t.stopIndex = h.cfg.Engine.Sibling(x), stop
}

// schemaOf returns the compiled schema of store st at a revision, nil when it has none:
// what the index of st's nested sets is planned from.
func (h *Handler) schemaOf(st store.Store) func(context.Context, store.Revision) (*ir.Schema, error) {
	return func(ctx context.Context, rev store.Revision) (*ir.Schema, error) {
		r, err := st.Reader(ctx, rev)
		if err != nil {
			return nil, err
		}
		text, err := r.Schema(ctx)
		if err != nil || text == "" {
			return nil, err
		}
		v, err := h.schemas.Get(ctx, text)
		if err != nil {
			return nil, err
		}
		return v.IR, nil
	}
}

// release stops tenant t's index and closes its store if the handler opened it.
func (t *tenant) release() {
	if t.stopIndex != nil {
		t.stopIndex()
	}
	if t.owned {
		_ = t.store.Close()
	}
}

// Close closes the stores of tenants created through the API.
func (h *Handler) Close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return
	}
	h.closed = true
	for _, t := range h.tenants {
		t.release()
	}
}

// route is one tenant-scoped endpoint.
type route func(ctx context.Context, t *tenant, body []byte) (any, error)

func (h *Handler) routes() map[string]route {
	return map[string]route{
		"schemas/write":                  h.schemaWrite,
		"schemas/read":                   h.schemaRead,
		"data/write":                     h.dataWrite,
		"data/relationships/write":       h.dataWrite,
		"data/read":                      h.dataRead,
		"data/relationships/read":        h.relationshipsRead,
		"data/attributes/read":           h.attributesRead,
		"data/delete":                    h.dataDelete,
		"relationships/write":            h.dataWrite,
		"relationships/read":             h.relationshipsRead,
		"permissions/check":              h.check,
		"permissions/bulk-check":         h.bulkCheck,
		"permissions/lookup-entity":      h.lookupEntity,
		"permissions/lookup-subject":     h.lookupSubject,
		"permissions/subject-permission": h.subjectPermission,
		"permissions/expand":             h.expand,
	}
}

// streamRoute is a tenant-scoped endpoint that answers with a stream of results, as
// grpc-gateway serves Permify's server-streaming calls; send writes one result.
type streamRoute func(ctx context.Context, t *tenant, body []byte, send func(result any) error) error

func (h *Handler) streams() map[string]streamRoute {
	return map[string]streamRoute{
		"permissions/lookup-entity-stream": h.lookupEntityStream,
	}
}

// expensiveEndpoints are the tenant endpoints whose cost grows with the data (or, for
// a schema, with its size): the server admits them in its expensive class, as it
// admits the SpiceDB API's lookups, reads and schema writes.
var expensiveEndpoints = map[string]bool{
	"schemas/write":                    true,
	"data/read":                        true,
	"data/relationships/read":          true,
	"data/attributes/read":             true,
	"relationships/read":               true,
	"permissions/lookup-entity":        true,
	"permissions/lookup-entity-stream": true,
	"permissions/lookup-subject":       true,
}

// Expensive says whether the request at path (/v1/tenants/{id}/...) is one of the
// expensive endpoints.
func Expensive(path string) bool {
	rest, _ := strings.CutPrefix(path, "/v1/tenants/")
	_, endpoint, _ := strings.Cut(rest, "/")
	return expensiveEndpoints[endpoint]
}

// ServeHTTP routes /v1/tenants/... requests.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h.cfg.Authorize != nil {
		if err := h.cfg.Authorize(r); err != nil {
			writeError(w, err)
			return
		}
	}
	rest, ok := strings.CutPrefix(r.URL.Path, "/v1/tenants/")
	if !ok {
		writeError(w, notFound("ERROR_CODE_NOT_FOUND", "no such path: "+r.URL.Path))
		return
	}
	id, path, _ := strings.Cut(rest, "/")
	if fn := h.streams()[path]; fn != nil && r.Method == http.MethodPost {
		h.serveStream(w, r, id, fn)
		return
	}
	resp, err := h.dispatch(r, rest)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, resp)
}

func (h *Handler) dispatch(r *http.Request, rest string) (any, error) {
	body, err := readBody(r)
	if err != nil {
		return nil, err
	}
	switch {
	case rest == "create" && r.Method == http.MethodPost:
		return h.createTenant(body)
	case rest == "list" && r.Method == http.MethodPost:
		return h.listTenants()
	case !strings.Contains(rest, "/") && r.Method == http.MethodDelete:
		return h.deleteTenant(rest)
	}
	id, path, _ := strings.Cut(rest, "/")
	fn := h.routes()[path]
	if fn == nil || r.Method != http.MethodPost {
		return nil, notFound("ERROR_CODE_NOT_FOUND", "no such endpoint: "+r.Method+" "+r.URL.Path)
	}
	t, err := h.tenant(id)
	if err != nil {
		return nil, err
	}
	return fn(r.Context(), t, body)
}

func readBody(r *http.Request) ([]byte, error) {
	if r.Body == nil {
		return nil, nil
	}
	body, err := io.ReadAll(r.Body)
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		return nil, &apiError{
			code: codes.ResourceExhausted, reason: "ERROR_CODE_MAX_DATA_PER_WRITE_EXCEEDED",
			msg: "request body is larger than the server's limit of " + strconv.FormatInt(tooBig.Limit, 10) + " bytes",
		}
	case err != nil:
		return nil, invalid("ERROR_CODE_INVALID_ARGUMENT", "reading the request body: "+err.Error())
	}
	return body, nil
}

// decode reads a JSON body into v; unknown fields are ignored, as Permify does.
func decode(body []byte, v any) error {
	if len(strings.TrimSpace(string(body))) == 0 {
		return nil
	}
	if err := json.Unmarshal(body, v); err != nil {
		return invalid("ERROR_CODE_INVALID_ARGUMENT", "request body is not valid JSON for this endpoint: "+err.Error())
	}
	return nil
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		body = []byte(`{"code":13,"message":"ERROR_CODE_INTERNAL","details":[]}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// Tenants.

type tenantJSON struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	CreatedAt string `json:"created_at"`
}

func (t *tenant) json() tenantJSON {
	return tenantJSON{ID: t.ID, Name: t.Name, CreatedAt: t.Created.Format(time.RFC3339Nano)}
}

func (h *Handler) tenant(id string) (*tenant, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	t := h.tenants[id]
	if t == nil || h.closed {
		return nil, notFound("ERROR_CODE_TENANT_NOT_FOUND", "tenant "+quote(id)+" does not exist; create it with POST /v1/tenants/create")
	}
	return t, nil
}

func (h *Handler) createTenant(body []byte) (any, error) {
	var req struct{ ID, Name string }
	if err := decode(body, &req); err != nil {
		return nil, err
	}
	if !validTenantID(req.ID) {
		return nil, invalid("ERROR_CODE_VALIDATION", "tenant id "+quote(req.ID)+" is invalid: use 1 to 64 letters, digits, `_` or `-`")
	}
	if h.cfg.Tenants == nil {
		return nil, &apiError{code: codes.Unimplemented, reason: "ERROR_CODE_NOT_IMPLEMENTED", msg: "this server does not create tenants"}
	}
	if err := h.reserve(req.ID); err != nil {
		return nil, err
	}
	// The store is made without the lock: opening one waits on its database, and every
	// other request on every tenant takes the lock.
	t := &tenant{ID: req.ID, Name: req.Name, Created: time.Now().UTC(), owned: true}
	st, err := h.cfg.Tenants.Create(TenantInfo{ID: t.ID, Name: t.Name, Created: t.Created})
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.creating, req.ID)
	if err != nil {
		return nil, err // classified by toAPI: the datastore's outage, never its address
	}
	if h.closed {
		_ = st.Close()
		return nil, errShuttingDown
	}
	t.store = st
	h.setEngine(t)
	h.tenants[req.ID] = t
	return map[string]any{"tenant": t.json()}, nil
}

var errShuttingDown = &apiError{code: codes.Unavailable, reason: "ERROR_CODE_INTERNAL", msg: "server is shutting down"}

// reserve claims a new tenant id while its store is made, within Config.MaxTenants.
func (h *Handler) reserve(id string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return errShuttingDown
	}
	if _, dup := h.tenants[id]; dup || h.creating[id] {
		return &apiError{code: codes.AlreadyExists, reason: "ERROR_CODE_UNIQUE_CONSTRAINT", msg: "tenant " + quote(id) + " already exists"}
	}
	if n := len(h.tenants) - 1 + len(h.creating); h.cfg.MaxTenants > 0 && n >= h.cfg.MaxTenants {
		return &apiError{
			code: codes.FailedPrecondition, reason: "ERROR_CODE_VALIDATION",
			msg: "this server holds at most " + strconv.Itoa(h.cfg.MaxTenants) + " tenants besides t1 (--max-tenants); delete one first",
		}
	}
	h.creating[id] = true
	return nil
}

func validTenantID(id string) bool {
	if id == "" || len(id) > 64 {
		return false
	}
	for _, c := range id {
		if !(c == '_' || c == '-' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

func (h *Handler) listTenants() (any, error) {
	h.mu.Lock()
	out := make([]tenantJSON, 0, len(h.tenants))
	for _, t := range h.tenants {
		out = append(out, t.json())
	}
	h.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return map[string]any{"tenants": out, "continuous_token": ""}, nil
}

func (h *Handler) deleteTenant(id string) (any, error) {
	if id == DefaultTenant {
		return nil, invalid("ERROR_CODE_VALIDATION", "tenant t1 is the server's own store and cannot be deleted")
	}
	h.mu.Lock()
	t := h.tenants[id]
	delete(h.tenants, id)
	h.mu.Unlock()
	if t == nil {
		return nil, notFound("ERROR_CODE_TENANT_NOT_FOUND", "tenant "+quote(id)+" does not exist")
	}
	t.release()
	if t.owned {
		if err := h.cfg.Tenants.Remove(id); err != nil {
			return nil, err // classified by toAPI, without the database's detail
		}
	}
	return map[string]any{"tenant": t.json()}, nil
}

// Call runs one tenant endpoint ("permissions/check", "data/write", ...) in-process,
// for tools such as validation files that want exactly the server's behaviour without
// a listener. body is the request JSON; the answer is the response JSON. A failure is
// an error whose text is Permify's reason and a sentence.
func (h *Handler) Call(ctx context.Context, tenantID, endpoint string, body []byte) ([]byte, error) {
	fn := h.routes()[endpoint]
	if fn == nil {
		return nil, notFound("ERROR_CODE_NOT_FOUND", "no such endpoint: "+endpoint)
	}
	t, err := h.tenant(tenantID)
	if err != nil {
		return nil, err
	}
	resp, err := fn(ctx, t, body)
	if err != nil {
		return nil, toAPI(err)
	}
	return json.Marshal(resp)
}
