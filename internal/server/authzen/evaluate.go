package authzen

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/latch-authz/latch/internal/engine"
)

// evaluation answers one access evaluation; an error of the check (an unknown
// definition or permission, a caveat that cannot be evaluated) is the request's.
func (h *Handler) evaluation(ctx context.Context, d Data, body []byte) (any, error) {
	var t tuple
	if err := decode(body, &t); err != nil {
		return nil, err
	}
	req, err := d.checkRequest(t, "")
	if err != nil {
		return nil, err
	}
	res, err := d.Engine.Check(ctx, d.Schema, d.Reader, req)
	if err != nil {
		return nil, err
	}
	return d.decisionOf(res)
}

// Evaluation semantics of an access evaluations request (options.evaluations_semantic).
const (
	executeAll          = "execute_all"
	denyOnFirstDeny     = "deny_on_first_deny"
	permitOnFirstPermit = "permit_on_first_permit"
)

type evaluationsRequest struct {
	tuple
	Evaluations []tuple `json:"evaluations"`
	Options     struct {
		Semantic string `json:"evaluations_semantic"`
	} `json:"options"`
}

// evaluations answers an access evaluations request. Without evaluations it is an
// access evaluation. An evaluation whose check fails is denied with the error in its
// context; the others are answered. execute_all checks everything at once (one bulk
// check: items that differ only in their resource share their store queries); the
// short-circuiting semantics check in order and stop at the first denial (an error
// is one) or the first permit.
func (h *Handler) evaluations(ctx context.Context, d Data, body []byte) (any, error) {
	var req evaluationsRequest
	if err := decode(body, &req); err != nil {
		return nil, err
	}
	if len(req.Evaluations) == 0 {
		return h.evaluation(ctx, d, body)
	}
	switch req.Options.Semantic {
	case "", executeAll, denyOnFirstDeny, permitOnFirstPermit:
	default:
		return nil, badRequest("options.evaluations_semantic: %q is not one of %s, %s, %s", req.Options.Semantic, executeAll, denyOnFirstDeny, permitOnFirstPermit)
	}
	if len(req.Evaluations) > h.cfg.MaxEvaluations {
		return nil, badRequest("evaluations: %d evaluations, more than the maximum of %d in one request", len(req.Evaluations), h.cfg.MaxEvaluations)
	}
	checks := make([]engine.CheckRequest, len(req.Evaluations))
	for i, e := range req.Evaluations {
		c, err := d.checkRequest(e.withDefaults(req.tuple), fmt.Sprintf("evaluations[%d].", i))
		if err != nil {
			return nil, err
		}
		checks[i] = c
	}
	var out []decision
	if req.Options.Semantic == "" || req.Options.Semantic == executeAll {
		for _, r := range d.Engine.CheckBulk(ctx, d.Schema, d.Reader, checks) {
			out = append(out, h.itemDecision(d, r.Result, r.Err))
		}
		if ctx.Err() != nil {
			return nil, ctx.Err() // the client went away: its items' errors are not answers
		}
		return map[string]any{"evaluations": out}, nil
	}
	for _, c := range checks {
		res, err := d.Engine.Check(ctx, d.Schema, d.Reader, c)
		dec := h.itemDecision(d, res, err)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		stop := dec.Decision == (req.Options.Semantic == permitOnFirstPermit)
		if stop && dec.Context == nil {
			dec.Context = map[string]any{"reason": req.Options.Semantic}
		}
		out = append(out, dec)
		if stop {
			break
		}
	}
	return map[string]any{"evaluations": out}, nil
}

// itemDecision is one evaluation's answer in an evaluations response: its decision,
// or, when its check failed, a denial carrying the error's status and message.
func (h *Handler) itemDecision(d Data, res engine.Result, err error) decision {
	if err == nil {
		var dec decision
		if dec, err = d.decisionOf(res); err == nil {
			return dec
		}
	}
	if re, ok := errors.AsType[*requestError](err); ok {
		return decision{Context: map[string]any{"error": map[string]any{"status": http.StatusBadRequest, "message": re.msg}}}
	}
	status, msg := d.errorStatus(h.cfg.Status)(err)
	return decision{Context: map[string]any{"error": map[string]any{"status": status, "message": msg}}}
}
