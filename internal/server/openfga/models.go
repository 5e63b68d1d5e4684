package openfga

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/oklog/ulid/v2"
	openfgav1 "github.com/openfga/api/proto/openfga/v1"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/latch-authz/latch/internal/engine"
	"github.com/latch-authz/latch/internal/fga"
	"github.com/latch-authz/latch/internal/store"
)

// A store's authorization models, its assertions and its name live in one JSON
// document, the store's schema text under docHeader. Models are immutable and a
// store has few, so a new model rewrites the document in one schema write, atomic on
// every backend; the store's revisions version it like its tuples.
const docHeader = "// latch: openfga store\n"

// document is the stored form.
type document struct {
	// Name and Updated are set by UpdateStore.
	Name    string    `json:"name,omitempty"`
	Updated time.Time `json:"updated,omitzero"`
	// Models are AuthorizationModel JSON, oldest first.
	Models []json.RawMessage `json:"models,omitempty"`
	// Assertions are the ReadAssertionsResponse JSON of each model that has any.
	Assertions map[string]json.RawMessage `json:"assertions,omitempty"`
}

// parsedDoc is a document with its models decoded.
type parsedDoc struct {
	document
	text   string
	models []*openfgav1.AuthorizationModel // oldest first
}

func (d *parsedDoc) model(id string) *openfgav1.AuthorizationModel {
	for _, m := range d.models {
		if m.GetId() == id {
			return m
		}
	}
	return nil
}

// parseDoc reads a stored document ("" is an empty one).
func parseDoc(text string) (*parsedDoc, error) {
	d := &parsedDoc{text: text}
	if text == "" {
		return d, nil
	}
	body, ok := strings.CutPrefix(text, docHeader)
	if !ok {
		return nil, errors.New("the store's schema is not an OpenFGA models document")
	}
	if err := json.Unmarshal([]byte(body), &d.document); err != nil {
		return nil, err
	}
	for _, raw := range d.Models {
		m := &openfgav1.AuthorizationModel{}
		if err := protojson.Unmarshal(raw, m); err != nil {
			return nil, err
		}
		d.models = append(d.models, m)
	}
	return d, nil
}

func (d *document) text() (string, error) {
	raw, err := json.Marshal(d)
	if err != nil {
		return "", err
	}
	return docHeader + string(raw), nil
}

// documentAt returns the document r reads, parsed once per text and read once per
// revision: the last document parsed remembers the newest revision it was read at,
// and a revision never changes.
func (st *fgaStore) documentAt(ctx context.Context, r store.Reader) (*parsedDoc, error) {
	st.cacheMu.Lock()
	if d := st.doc; d != nil && st.docRev == r.Revision() {
		st.cacheMu.Unlock()
		return d, nil
	}
	st.cacheMu.Unlock()
	text, err := r.Schema(ctx)
	if err != nil {
		return nil, storeError(err)
	}
	st.cacheMu.Lock()
	d := st.doc
	st.cacheMu.Unlock()
	if d == nil || d.text != text {
		if d, err = parseDoc(text); err != nil {
			return nil, fgaError(openfgav1.InternalErrorCode_internal_error, "the store's models document does not parse")
		}
	}
	st.cacheMu.Lock()
	if st.doc == nil || st.docRev <= r.Revision() {
		st.doc, st.docRev = d, r.Revision()
	}
	st.cacheMu.Unlock()
	return d, nil
}

// document returns the newest document.
func (st *fgaStore) document(ctx context.Context) (*parsedDoc, error) {
	r, err := st.head(ctx)
	if err != nil {
		return nil, err
	}
	return st.documentAt(ctx, r)
}

func (st *fgaStore) head(ctx context.Context) (store.Reader, error) {
	rev, err := st.data.HeadRevision(ctx)
	if err != nil {
		return nil, storeError(err)
	}
	r, err := st.data.Reader(ctx, rev)
	return r, storeError(err)
}

// errDocChanged: the document changed between reading it and writing its new form.
var errDocChanged = errors.New("the store's models document changed during the write")

// rewrite applies change to the newest document and stores the result. The write
// checks, in its transaction, that the document is still the one changed, and
// starts again if another server's write came between.
func (st *fgaStore) rewrite(ctx context.Context, change func(*document) error) error {
	st.docMu.Lock()
	defer st.docMu.Unlock()
	for attempt := 0; ; attempt++ {
		cur, err := st.document(ctx)
		if err != nil {
			return err
		}
		next := cur.document
		next.Models = append([]json.RawMessage(nil), cur.Models...)
		next.Assertions = make(map[string]json.RawMessage, len(cur.Assertions)+1)
		for k, v := range cur.Assertions {
			next.Assertions[k] = v
		}
		if err := change(&next); err != nil {
			return err
		}
		text, err := next.text()
		if err != nil {
			return storeError(err)
		}
		_, err = st.data.WriteSchema(ctx, text, func(ctx context.Context, r store.Reader) error {
			now, err := r.Schema(ctx)
			if err == nil && now != cur.text {
				return errDocChanged
			}
			return err
		})
		if errors.Is(err, errDocChanged) && attempt < 8 {
			continue
		}
		return storeError(err)
	}
}

// modelFor returns the compiled model a request reading at r runs with: modelID's,
// or the newest at r. A model written after r (a MINIMIZE_LATENCY read's revision
// may be a few seconds old) is found at the head; a nil r reads the head.
func (st *fgaStore) modelFor(ctx context.Context, r store.Reader, modelID string) (*compiledModel, error) {
	var doc *parsedDoc
	var err error
	if r != nil {
		if doc, err = st.documentAt(ctx, r); err != nil {
			return nil, err
		}
	}
	if doc == nil || len(doc.models) == 0 || (modelID != "" && doc.model(modelID) == nil) {
		if doc, err = st.document(ctx); err != nil {
			return nil, err
		}
	}
	var m *openfgav1.AuthorizationModel
	if modelID == "" {
		if len(doc.models) == 0 {
			return nil, fgaError(openfgav1.ErrorCode_latest_authorization_model_not_found, "No authorization models found for store '%s'", st.id)
		}
		m = doc.models[len(doc.models)-1]
	} else if m = doc.model(modelID); m == nil {
		return nil, fgaError(openfgav1.ErrorCode_authorization_model_not_found, "Authorization Model '%s' not found", modelID)
	}
	return st.compile(m)
}

// compiledModel is a model compiled, with the engine that evaluates it: answers
// under OpenFGA's semantics depend on the model as well as the revision (the tuples a
// model does not admit are hidden), so each model's engine keys its cache apart.
type compiledModel struct {
	model  *fga.Model
	engine *engine.Engine
}

// maxCompiledModels bounds a store's compiled models; a store's requests use one or
// two at a time.
const maxCompiledModels = 16

func (st *fgaStore) compile(m *openfgav1.AuthorizationModel) (*compiledModel, error) {
	st.cacheMu.Lock()
	c, ok := st.compiled[m.GetId()]
	st.cacheMu.Unlock()
	if ok {
		return c, nil
	}
	fm, problems := fga.Compile(m)
	if len(problems) > 0 {
		return nil, fgaError(openfgav1.InternalErrorCode_internal_error, "the stored authorization model '%s' does not compile", m.GetId())
	}
	st.cacheMu.Lock()
	if len(st.compiled) >= maxCompiledModels {
		clear(st.compiled)
	}
	c = &compiledModel{model: fm, engine: st.engine.OpenFGASibling()}
	st.compiled[m.GetId()] = c
	st.cacheMu.Unlock()
	return c, nil
}

// WriteAuthorizationModel validates a model, gives it a new ULID and stores it.
// Every problem is listed in the message.
func (s *Service) WriteAuthorizationModel(ctx context.Context, req *openfgav1.WriteAuthorizationModelRequest) (*openfgav1.WriteAuthorizationModelResponse, error) {
	st, err := s.storeFor(req)
	if err != nil {
		return nil, err
	}
	m := &openfgav1.AuthorizationModel{
		Id: ulid.Make().String(), SchemaVersion: req.GetSchemaVersion(),
		TypeDefinitions: req.GetTypeDefinitions(), Conditions: req.GetConditions(),
	}
	if _, problems := fga.Compile(m); len(problems) > 0 {
		return nil, modelProblems(problems)
	}
	raw, err := protojson.Marshal(m)
	if err != nil {
		return nil, storeError(err)
	}
	err = st.rewrite(ctx, func(d *document) error {
		d.Models = append(d.Models, raw)
		return nil
	})
	if err != nil {
		return nil, err
	}
	setHTTPCode(ctx, http.StatusCreated)
	return &openfgav1.WriteAuthorizationModelResponse{AuthorizationModelId: m.Id}, nil
}

// modelProblems is OpenFGA's answer to an invalid model, with every problem.
func modelProblems(problems []fga.Problem) error {
	msgs := make([]string, len(problems))
	for i, p := range problems {
		msgs[i] = p.Error()
	}
	return fgaError(openfgav1.ErrorCode_invalid_authorization_model, "%s", strings.Join(msgs, "; "))
}

// ReadAuthorizationModel returns one model.
func (s *Service) ReadAuthorizationModel(ctx context.Context, req *openfgav1.ReadAuthorizationModelRequest) (*openfgav1.ReadAuthorizationModelResponse, error) {
	st, err := s.storeFor(req)
	if err != nil {
		return nil, err
	}
	doc, err := st.document(ctx)
	if err != nil {
		return nil, err
	}
	m := doc.model(req.GetId())
	if m == nil {
		return nil, fgaError(openfgav1.ErrorCode_authorization_model_not_found, "Authorization Model '%s' not found", req.GetId())
	}
	return &openfgav1.ReadAuthorizationModelResponse{AuthorizationModel: m}, nil
}

// ReadAuthorizationModels lists models newest first, a page at a time.
func (s *Service) ReadAuthorizationModels(ctx context.Context, req *openfgav1.ReadAuthorizationModelsRequest) (*openfgav1.ReadAuthorizationModelsResponse, error) {
	if err := validated(req); err != nil {
		return nil, err
	}
	size, err := pageSize(req.GetPageSize())
	if err != nil {
		return nil, err
	}
	before, err := decodeToken(req.GetContinuationToken(), "models")
	if err != nil {
		return nil, err
	}
	st, err := s.store(req.GetStoreId())
	if err != nil {
		return nil, err
	}
	doc, err := st.document(ctx)
	if err != nil {
		return nil, err
	}
	out := &openfgav1.ReadAuthorizationModelsResponse{}
	for i := len(doc.models) - 1; i >= 0; i-- {
		m := doc.models[i]
		if before != "" && m.GetId() >= before {
			continue
		}
		if len(out.AuthorizationModels) == size {
			out.ContinuationToken = encodeToken("models", out.AuthorizationModels[size-1].GetId())
			break
		}
		out.AuthorizationModels = append(out.AuthorizationModels, m)
	}
	return out, nil
}

// WriteAssertions replaces a model's assertions.
func (s *Service) WriteAssertions(ctx context.Context, req *openfgav1.WriteAssertionsRequest) (*openfgav1.WriteAssertionsResponse, error) {
	st, err := s.storeFor(req)
	if err != nil {
		return nil, err
	}
	cm, err := st.modelFor(ctx, nil, req.GetAuthorizationModelId())
	if err != nil {
		return nil, err
	}
	for _, a := range req.GetAssertions() {
		tk := a.GetTupleKey()
		if _, err := cm.model.CheckRequest(tk.GetObject(), tk.GetRelation(), tk.GetUser(), a.GetContext()); err != nil {
			return nil, fgaErr(err)
		}
		for _, ct := range a.GetContextualTuples() {
			if _, err := cm.model.Relationship(ct); err != nil {
				return nil, fgaErr(err)
			}
		}
	}
	raw, err := protojson.Marshal(&openfgav1.ReadAssertionsResponse{AuthorizationModelId: req.GetAuthorizationModelId(), Assertions: req.GetAssertions()})
	if err != nil {
		return nil, storeError(err)
	}
	err = st.rewrite(ctx, func(d *document) error {
		d.Assertions[req.GetAuthorizationModelId()] = raw
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &openfgav1.WriteAssertionsResponse{}, nil
}

// ReadAssertions returns a model's assertions (none when none were written).
func (s *Service) ReadAssertions(ctx context.Context, req *openfgav1.ReadAssertionsRequest) (*openfgav1.ReadAssertionsResponse, error) {
	st, err := s.storeFor(req)
	if err != nil {
		return nil, err
	}
	doc, err := st.document(ctx)
	if err != nil {
		return nil, err
	}
	if doc.model(req.GetAuthorizationModelId()) == nil {
		return nil, fgaError(openfgav1.ErrorCode_authorization_model_not_found, "Authorization Model '%s' not found", req.GetAuthorizationModelId())
	}
	out := &openfgav1.ReadAssertionsResponse{AuthorizationModelId: req.GetAuthorizationModelId()}
	if raw, ok := doc.Assertions[req.GetAuthorizationModelId()]; ok {
		if err := protojson.Unmarshal(raw, out); err != nil {
			return nil, fgaError(openfgav1.InternalErrorCode_internal_error, "the stored assertions do not parse")
		}
	}
	return out, nil
}
