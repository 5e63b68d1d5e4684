package playground

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/latch-authz/latch/internal/engine"
	"github.com/latch-authz/latch/internal/rel"
)

// analysis is the answer to /api/analyze: the problems of the schema and the
// relationships, as the page marks them under their lines.
type analysis struct {
	Language      string       `json:"language"`
	Schema        []diagnostic `json:"schema"`
	Relationships []diagnostic `json:"relationships"`
}

func (w *workspace) analysis() analysis {
	return analysis{Language: w.language, Schema: nonNil(w.schemaDiags), Relationships: nonNil(w.relationships)}
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// withSession runs fn on req's session's workspace, within the request timeout.
func (h *Handler) withSession(r *http.Request, req *request, fn func(context.Context, *session, *workspace) error) error {
	s, err := h.session(req.Session)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.Timeout)
	defer cancel()
	err = s.use(ctx, req, func(w *workspace) error { return fn(ctx, s, w) })
	if ctx.Err() != nil {
		return ctx.Err() // past the limit, whatever part of the work noticed it
	}
	return err
}

func (h *Handler) analyze(r *http.Request, req *request) (any, error) {
	var out analysis
	err := h.withSession(r, req, func(_ context.Context, _ *session, w *workspace) error {
		out = w.analysis()
		return nil
	})
	return out, err
}

// checkResult is one check line's answer.
type checkResult struct {
	Line   int        `json:"line"`
	Text   string     `json:"text"`
	Result string     `json:"result,omitempty"` // HAS_PERMISSION, NO_PERMISSION, CONDITIONAL_PERMISSION
	Error  string     `json:"error,omitempty"`
	Trace  *traceNode `json:"trace,omitempty"`
	// Missing lists the caveat parameters a conditional answer waits for.
	Missing []string `json:"missing,omitempty"`
}

type checkAnswer struct {
	analysis
	Checks []checkResult `json:"checks"`
}

// check answers every line of req.Checks (`document:readme#view@user:alice`, with an
// optional ` with {json}` caveat context) with its trace.
func (h *Handler) check(r *http.Request, req *request) (any, error) {
	var out checkAnswer
	err := h.withSession(r, req, func(ctx context.Context, s *session, w *workspace) error {
		out.analysis = w.analysis()
		out.Checks = []checkResult{}
		for i, line := range strings.Split(req.Checks, "\n") {
			line = strings.TrimSpace(line)
			if line == "" || strings.HasPrefix(line, "//") {
				continue
			}
			if len(out.Checks) == h.cfg.MaxChecks {
				return &requestError{fmt.Sprintf("at most %d checks run at once", h.cfg.MaxChecks)}
			}
			res := checkResult{Line: i + 1, Text: line}
			if err := runCheck(ctx, s.eng, w, line, &res); err != nil {
				if err := ctx.Err(); err != nil {
					return err
				}
				res.Error = err.Error()
			}
			out.Checks = append(out.Checks, res)
		}
		return nil
	})
	return out, err
}

func runCheck(ctx context.Context, eng *engine.Engine, w *workspace, line string, res *checkResult) error {
	resource, permission, subject, caveatCtx, err := rel.ParseCheck(line)
	if err != nil {
		return err
	}
	if w.schema == nil {
		return errors.New("the schema has errors; fix them to run checks")
	}
	got, trace, err := eng.CheckTraced(ctx, w.schema, w.reader, engine.CheckRequest{
		Resource: resource, Permission: permission, Subject: subject, Context: caveatCtx,
	})
	if err != nil {
		return err
	}
	res.Result, res.Missing = got.Membership.String(), got.Missing
	res.Trace = newTraceNode(w.schema, trace)
	return nil
}
