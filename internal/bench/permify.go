package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// PermifyTarget sends a workload's checks to Permify's HTTP API
// (POST /v1/tenants/{tenant}/permissions/check) instead of the SpiceDB gRPC API, so
// that Permify-style servers, latch's included, are measured the way Permify's own
// load tests measure them. Only check steps can run against it.
type PermifyTarget struct {
	URL    string // base URL, e.g. http://127.0.0.1:8443
	Tenant string // default "t1"
	Token  string // sent as a bearer token when set
}

// permifyWorker runs check steps over HTTP, one request body buffer per worker.
type permifyWorker struct {
	p      *plan
	rnd    *rand.Rand
	client *http.Client
	url    string
	token  string
	calls  []func(context.Context) error
	body   bytes.Buffer
}

func newPermifyWorker(p *plan, t *PermifyTarget, client *http.Client, seed uint64, id int) *permifyWorker {
	tenant := t.Tenant
	if tenant == "" {
		tenant = "t1"
	}
	wk := &permifyWorker{
		p: p, rnd: rand.New(rand.NewPCG(seed, uint64(id)+1)), client: client, token: t.Token,
		url: strings.TrimRight(t.URL, "/") + "/v1/tenants/" + tenant + "/permissions/check",
	}
	g := &grpcWorker{p: p, rnd: wk.rnd} // shares the id drawing and step picking
	for _, s := range p.w.Steps {
		res, sub := g.drawers(s)
		wk.calls = append(wk.calls, func(ctx context.Context) error {
			return wk.check(ctx, s, res.id(), sub.id())
		})
	}
	return wk
}

func (wk *permifyWorker) do(ctx context.Context) (int, error) {
	i := (&grpcWorker{p: wk.p, rnd: wk.rnd}).pick()
	return i, wk.calls[i](ctx)
}

type permifyCheck struct {
	Metadata struct {
		Depth int `json:"depth"`
	} `json:"metadata"`
	Entity     permifyEntity `json:"entity"`
	Permission string        `json:"permission"`
	Subject    permifyEntity `json:"subject"`
}

type permifyEntity struct {
	Type string `json:"type"`
	ID   string `json:"id"`
}

func (wk *permifyWorker) check(ctx context.Context, s Step, resID, subID string) error {
	body := permifyCheck{Entity: permifyEntity{s.Resource.Type, resID}, Permission: s.Permission, Subject: permifyEntity{s.Subject.Type, subID}}
	body.Metadata.Depth = 20
	wk.body.Reset()
	if err := json.NewEncoder(&wk.body).Encode(body); err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, wk.url, bytes.NewReader(wk.body.Bytes()))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if wk.token != "" {
		req.Header.Set("Authorization", "Bearer "+wk.token)
	}
	resp, err := wk.client.Do(req)
	if err != nil {
		return status.Error(codes.Unavailable, err.Error())
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return status.Error(codes.Unavailable, err.Error())
	}
	if resp.StatusCode == http.StatusOK {
		return nil
	}
	// Permify's error body carries the gRPC code; count errors by it like gRPC ones.
	var e struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}
	if json.Unmarshal(raw, &e) != nil || e.Code == 0 {
		e.Code = int(codes.Unknown)
	}
	return status.Error(codes.Code(e.Code), fmt.Sprintf("HTTP %d: %s", resp.StatusCode, e.Message))
}

// checkStepsOnly refuses workloads the Permify target cannot run.
func checkStepsOnly(w *Workload) error {
	for _, s := range w.Steps {
		if s.Type != StepCheck {
			return fmt.Errorf("step %q is a %s step: the Permify HTTP target runs check steps only", s.Name, s.Type)
		}
	}
	return nil
}
