package permify

import (
	"encoding/json"
	"net/http"
	"time"
)

// serveStream answers a streaming endpoint as grpc-gateway answers Permify's
// server-streaming calls: newline-delimited JSON objects, {"result": ...} for each
// result, written and flushed as it is sent, and {"error": ...} (Permify's error body)
// if the call fails. An error before the first result also sets the HTTP status; after
// it, the status has gone out as 200 and the error object ends the stream.
//
// A client that stops reading does not hold the call (and its admission slot) for as
// long as its connection lives: each write must finish within Config.StreamStallTimeout,
// or the stream ends.
func (h *Handler) serveStream(w http.ResponseWriter, r *http.Request, tenantID string, fn streamRoute) {
	rc := http.NewResponseController(w)
	defer func() { _ = rc.SetWriteDeadline(time.Time{}) }() // the connection outlives the call
	started := false
	send := func(result any) error {
		line, err := json.Marshal(map[string]any{"result": result})
		if err != nil {
			return err
		}
		if !started {
			w.Header().Set("Content-Type", "application/json")
			started = true
		}
		if h.cfg.StreamStallTimeout > 0 {
			_ = rc.SetWriteDeadline(time.Now().Add(h.cfg.StreamStallTimeout)) // unsupported: no bound
		}
		if _, err := w.Write(append(line, '\n')); err != nil {
			return err
		}
		return rc.Flush()
	}
	body, err := readBody(r)
	if err == nil {
		var t *tenant
		if t, err = h.tenant(tenantID); err == nil {
			err = fn(r.Context(), t, body, send)
		}
	}
	if err == nil {
		return
	}
	status, eb := errorBody(err)
	if !started {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
	}
	line, _ := json.Marshal(map[string]any{"error": eb})
	_, _ = w.Write(append(line, '\n'))
}
