package permify

import (
	"net/http"
	"strings"
	"testing"

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
