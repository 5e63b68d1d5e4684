package playground

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/latch-authz/latch/internal/engine"
	"github.com/latch-authz/latch/internal/rel"
	"github.com/latch-authz/latch/internal/schema"
	"github.com/latch-authz/latch/internal/schema/ir"
	"github.com/latch-authz/latch/internal/schema/perm"
	"github.com/latch-authz/latch/internal/store"
	"github.com/latch-authz/latch/internal/store/memory"
	"github.com/latch-authz/latch/internal/validationfile"
)

// Schema languages.
const (
	spiceDB = "spicedb"
	permify = "permify"
)

// maxSchemaBytes bounds one session's schema text.
const maxSchemaBytes = 256 << 10

// request is what every API call sends: the page's state and what the call needs.
// The whole state comes with every call, so a session dropped for being idle or
// evicted is rebuilt transparently.
type request struct {
	Session string `json:"session"`
	// Language is "spicedb", "permify", or "" to detect it from the schema.
	Language      string `json:"language"`
	Schema        string `json:"schema"`
	Relationships string `json:"relationships"`
	Checks        string `json:"checks"`
	// Assertions is SpiceDB's `assertions` mapping, or Permify's `scenarios` list.
	Assertions string `json:"assertions"`
	// Validation is SpiceDB's `validation` mapping (expected relations).
	Validation string `json:"validation"`
	// File is a validation file to import.
	File string `json:"file"`
}

// diagnostic is one problem at a line (1-based) and column (1-based bytes, 0 when
// unknown) of one of the page's editors.
type diagnostic struct {
	Line     int    `json:"line"`
	Col      int    `json:"col,omitempty"`
	Message  string `json:"message"`
	Severity string `json:"severity"` // "error" or "warning"
}

// session is one browser session's scratch store and engine.
type session struct {
	cfg      Config
	eng      *engine.Engine
	lastUsed time.Time // guarded by Handler.mu

	mu     sync.Mutex
	key    [sha256.Size]byte // guarded by mu; identifies the text state was built from
	state  *workspace        // guarded by mu
	closed bool              // guarded by mu
}

// workspace is the compiled schema and loaded relationships of one state of the page.
type workspace struct {
	language      string
	schema        *ir.Schema // nil when the schema does not compile
	schemaDiags   []diagnostic
	relationships []diagnostic
	store         *memory.Store
	reader        store.Reader
}

func newSession(cfg Config) *session {
	return &session{cfg: cfg, eng: engine.New(engine.Config{MaxDepth: cfg.MaxDepth})}
}

func (s *session) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	if s.state != nil {
		_ = s.state.store.Close()
		s.state = nil
	}
}

// use runs fn on the workspace built from req's schema and relationships, rebuilding
// it only when they changed since the last call.
func (s *session) use(ctx context.Context, req *request, fn func(*workspace) error) error {
	lang, err := language(req)
	if err != nil {
		return err
	}
	key := sha256.Sum256([]byte(lang + "\x00" + req.Schema + "\x00" + req.Relationships))
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		// Dropped while this request waited; a fresh scratch store serves it.
		s.closed, s.state = false, nil
	}
	if s.state == nil || s.key != key {
		w, err := build(ctx, lang, req.Schema, req.Relationships, s.cfg.MaxRelationships)
		if err != nil {
			return err
		}
		if s.state != nil {
			_ = s.state.store.Close()
		}
		s.state, s.key = w, key
	}
	return fn(s.state)
}

// language is the request's schema language, detected when it names none. It also
// bounds the schema's size.
func language(req *request) (string, error) {
	if len(req.Schema) > maxSchemaBytes {
		return "", &requestError{fmt.Sprintf("the schema is %d bytes; the playground holds at most %d", len(req.Schema), maxSchemaBytes)}
	}
	switch req.Language {
	case "":
		return detectLanguage(req.Schema), nil
	case spiceDB, permify:
		return req.Language, nil
	}
	return "", &requestError{fmt.Sprintf("unknown schema language %q: expected spicedb or permify", req.Language)}
}

// detectLanguage reads the schema's first declaration: `entity` is Permify's
// language, anything else SpiceDB's.
func detectLanguage(src string) string {
	for _, line := range strings.Split(src, "\n") {
		word, _, _ := strings.Cut(strings.TrimSpace(line), " ")
		switch word {
		case "entity":
			return permify
		case "definition", "caveat", "use":
			return spiceDB
		}
	}
	return spiceDB
}

// build compiles the schema and loads every valid relationship into a new memory
// store, so checks answer even while some lines are still wrong.
func build(ctx context.Context, lang, schemaText, relText string, maxRels int) (*workspace, error) {
	w := &workspace{language: lang}
	w.schema, w.schemaDiags = compile(lang, schemaText)
	updates, attrs := w.parseRelationships(relText, maxRels)
	w.store = memory.New(memory.Options{GCInterval: -1})
	rev, err := w.store.HeadRevision(ctx)
	if err == nil && len(updates) > 0 {
		rev, err = w.store.Write(ctx, nil, updates, nil)
	}
	if err == nil && len(attrs) > 0 && w.schema != nil {
		rev, err = w.writeAttributes(ctx, attrs, rev)
	}
	if err == nil {
		w.reader, err = w.store.Reader(ctx, rev)
	}
	if err != nil {
		_ = w.store.Close()
		return nil, fmt.Errorf("loading the playground's relationships: %w", err)
	}
	return w, nil
}

// compile returns the schema, or nil and every diagnostic; warnings come either way.
func compile(lang, src string) (*ir.Schema, []diagnostic) {
	var s *ir.Schema
	var err error
	if lang == permify {
		s, err = perm.Compile(src)
	} else {
		s, err = schema.Compile(src)
	}
	var diags []diagnostic
	var de *schema.DiagnosticsError
	switch {
	case errors.As(err, &de):
		for _, d := range de.Diagnostics {
			diags = append(diags, diagnostic{Line: d.Pos.Line, Col: d.Pos.Col, Message: d.Msg, Severity: "error"})
		}
		return nil, diags
	case err != nil:
		return nil, []diagnostic{{Line: 1, Message: err.Error(), Severity: "error"}}
	}
	if lang == spiceDB {
		for _, d := range schema.Warnings(src) {
			diags = append(diags, diagnostic{Line: d.Pos.Line, Col: d.Pos.Col, Message: d.Msg, Severity: "warning"})
		}
	}
	return s, diags
}

// parseRelationships reads one relationship a line (blank lines and `//` comments
// skipped), records each bad line's problem, and returns the writes of the good ones,
// and the Permify attributes among the lines. Relationships are only checked against
// the schema when it compiles.
func (w *workspace) parseRelationships(text string, maxRels int) ([]store.Update, []attributeLine) {
	var updates []store.Update
	var attrs []attributeLine
	seen := map[rel.Key]int{}
	for i, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "//") {
			continue
		}
		bad := func(format string, args ...any) {
			w.relationships = append(w.relationships, diagnostic{Line: i + 1, Message: fmt.Sprintf(format, args...), Severity: "error"})
		}
		if len(seen)+len(attrs) >= maxRels {
			bad("the playground holds at most %d relationships", maxRels)
			break
		}
		if isAttribute(w.language, line) {
			a, err := validationfile.ParsePermifyAttribute(line)
			if err != nil {
				bad("attribute: %v", err)
				continue
			}
			attrs = append(attrs, attributeLine{line: i + 1, attr: a})
			continue
		}
		r, err := rel.Parse(line)
		if err != nil {
			bad("%v", err)
			continue
		}
		if w.schema != nil {
			if err := w.schema.ValidateRelationship(r); err != nil {
				bad("%v", err)
				continue
			}
		}
		if first, dup := seen[r.Key()]; dup {
			bad("duplicate of the relationship on line %d", first)
			continue
		}
		seen[r.Key()] = i + 1
		updates = append(updates, store.Update{Op: store.Create, Relationship: r})
	}
	return updates, attrs
}
