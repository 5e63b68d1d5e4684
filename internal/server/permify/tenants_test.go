package permify

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/latch-authz/latch/internal/engine"
	"github.com/latch-authz/latch/internal/materialize"
	"github.com/latch-authz/latch/internal/schema/ir"
	"github.com/latch-authz/latch/internal/store"
)

// gatedTenants makes memory stores for tenants, each only once its test lets it.
type gatedTenants struct {
	MemoryTenants
	entered chan string   // the id of a creation that started
	gate    chan struct{} // a creation finishes when this is closed
}

func (g gatedTenants) Create(t TenantInfo) (store.Store, error) {
	g.entered <- t.ID
	<-g.gate
	return g.MemoryTenants.Create(t)
}

// TestTenantCreationHoldsNoLock: while a tenant's store is being made (its database
// slow), requests on other tenants are served, the id is taken (a second creation of
// it is refused) and the tenant does not exist yet; once made, it serves.
func TestTenantCreationHoldsNoLock(t *testing.T) {
	g := gatedTenants{entered: make(chan string, 1), gate: make(chan struct{})}
	a := newAPI(t, func(c *Config) { c.Tenants = g })
	created := make(chan int, 1)
	go func() {
		code, _ := a.do(http.MethodPost, "/v1/tenants/create", map[string]any{"id": "slow"})
		created <- code
	}()
	<-g.entered
	if code, out := a.do(http.MethodPost, "/v1/tenants/t1/schemas/write", map[string]any{"schema": "entity user {}"}); code != http.StatusOK {
		t.Fatalf("a request on t1 while a tenant is created: %d %v", code, out)
	}
	if code, out := a.do(http.MethodPost, "/v1/tenants/create", map[string]any{"id": "slow"}); code != http.StatusConflict {
		t.Errorf("creating a tenant whose creation is under way: %d %v, want 409", code, out)
	}
	if code, out := a.do(http.MethodPost, "/v1/tenants/slow/schemas/read", nil); code != http.StatusNotFound {
		t.Errorf("a tenant not yet made: %d %v, want 404", code, out)
	}
	close(g.gate)
	if code := <-created; code != http.StatusOK {
		t.Fatalf("the slow creation: %d", code)
	}
	if code, out := a.do(http.MethodPost, "/v1/tenants/slow/schemas/write", map[string]any{"schema": "entity user {}"}); code != http.StatusOK {
		t.Fatalf("the made tenant: %d %v", code, out)
	}
}

// TestMaxTenants: past MaxTenants a creation is refused with the limit named, and a
// deletion makes room.
func TestMaxTenants(t *testing.T) {
	a := newAPI(t, func(c *Config) { c.MaxTenants = 2 })
	for _, id := range []string{"a", "b"} {
		if code, out := a.do(http.MethodPost, "/v1/tenants/create", map[string]any{"id": id}); code != http.StatusOK {
			t.Fatalf("creating tenant %s: %d %v", id, code, out)
		}
	}
	code, out := a.do(http.MethodPost, "/v1/tenants/create", map[string]any{"id": "c"})
	detail, _ := out["details"].([]any)
	if code != http.StatusBadRequest || len(detail) == 0 || !strings.Contains(detail[0].(map[string]any)["metadata"].(map[string]any)["detail"].(string), "--max-tenants") {
		t.Fatalf("a third tenant with MaxTenants 2: %d %v, want 400 naming the limit", code, out)
	}
	if code, out := a.do(http.MethodDelete, "/v1/tenants/a", nil); code != http.StatusOK {
		t.Fatalf("deleting a tenant: %d %v", code, out)
	}
	if code, out := a.do(http.MethodPost, "/v1/tenants/create", map[string]any{"id": "c"}); code != http.StatusOK {
		t.Fatalf("a tenant after a deletion made room: %d %v", code, out)
	}
}

// TestTenantsUseTheirIndex: a tenant created through the API gets the index of its own
// store's nested sets, which answers its checks through nested groups as evaluation
// does, and deleting the tenant (or closing the handler, for t1's) ends its upkeep.
func TestTenantsUseTheirIndex(t *testing.T) {
	type made struct {
		st store.Store
		x  *materialize.Index
	}
	var mu sync.Mutex // the handler calls NewIndex and stop on its requests' goroutines
	var indexes []made
	stopped := 0
	counts := func() (int, int) {
		mu.Lock()
		defer mu.Unlock()
		return len(indexes), stopped
	}
	a := newAPI(t, func(c *Config) {
		c.NewIndex = func(_ string, st store.Store, schemaAt func(context.Context, store.Revision) (*ir.Schema, error)) (engine.SetIndex, func()) {
			x := materialize.New(materialize.Config{Store: st, SchemaAt: schemaAt, Retain: time.Minute})
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() {
				defer close(done)
				x.Run(ctx)
			}()
			mu.Lock()
			defer mu.Unlock()
			indexes = append(indexes, made{st, x})
			return x, func() {
				cancel()
				<-done
				mu.Lock()
				defer mu.Unlock()
				stopped++
			}
		}
	})
	if n, _ := counts(); n != 1 {
		t.Fatalf("%d indexes at start, want t1's", n)
	}
	a.ok("/v1/tenants/create", map[string]any{"id": "t2", "name": "second"})
	if n, _ := counts(); n != 2 {
		t.Fatalf("%d indexes after creating t2, want 2", n)
	}
	a.ok("/v1/tenants/t2/schemas/write", map[string]any{"schema": "entity user {}\nentity group { relation member @user @group#member }\nentity document { relation viewer @group#member permission view = viewer }"})
	tuples := []any{tuple("document:d", "viewer", "group:g0#member"), tuple("group:g7", "member", "user:u")}
	for i := range 7 {
		tuples = append(tuples, tuple(fmt.Sprint("group:g", i), "member", fmt.Sprint("group:g", i+1, "#member")))
	}
	snap := a.ok("/v1/tenants/t2/data/write", map[string]any{"metadata": map[string]any{}, "tuples": tuples})["snap_token"]
	mu.Lock()
	t2 := indexes[1]
	mu.Unlock()
	head, err := t2.st.HeadRevision(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for st := t2.x.Stats(); !st.Ready || st.Applied < head; st = t2.x.Stats() {
		if time.Now().After(deadline) {
			t.Fatalf("t2's index did not apply revision %d: %+v", head, st)
		}
		time.Sleep(time.Millisecond)
	}
	before := t2.x.Stats().Answers
	for user, want := range map[string]string{"user:u": allowed, "user:other": denied} {
		if got := a.check("t2", "document:d", "view", user, map[string]any{"metadata": map[string]any{"depth": 20, "snap_token": snap}}); got != want {
			t.Errorf("t2: document:d view %s: %s, want %s", user, got, want)
		}
	}
	if after := t2.x.Stats().Answers; after == before {
		t.Errorf("t2's index answered none of its checks (%d answers)", after)
	}
	if code, out := a.do(http.MethodDelete, "/v1/tenants/t2", nil); code != http.StatusOK {
		t.Fatalf("deleting t2: %d %v", code, out)
	}
	if _, n := counts(); n != 1 {
		t.Errorf("deleting t2 stopped %d indexes, want its own", n)
	}
}
