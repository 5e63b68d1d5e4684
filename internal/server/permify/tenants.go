package permify

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/latch-authz/latch/internal/store"
	"github.com/latch-authz/latch/internal/store/memory"
	"github.com/latch-authz/latch/internal/store/pebble"
	"github.com/latch-authz/latch/internal/store/sqlstore"
)

// MemoryTenants keeps each tenant in a memory store of its own: isolated, and gone
// when the process ends.
type MemoryTenants struct{ Options memory.Options }

// Existing returns no tenants: memory keeps none across runs.
func (MemoryTenants) Existing() ([]TenantInfo, error) { return nil, nil }

// Create returns an empty memory store.
func (m MemoryTenants) Create(TenantInfo) (store.Store, error) { return memory.New(m.Options), nil }

// Remove has nothing to delete: the closed store is garbage.
func (MemoryTenants) Remove(string) error { return nil }

// PebbleTenants keeps each tenant in a pebble data directory of its own under Dir
// (Dir/ID), described by Dir/ID.json, so tenants survive restarts like t1 does.
type PebbleTenants struct {
	Dir     string
	Options pebble.Options
}

type tenantFile struct {
	ID, Name string
	Created  string
}

// Existing reopens every tenant described in Dir.
func (p PebbleTenants) Existing() ([]TenantInfo, error) {
	entries, err := os.ReadDir(p.Dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the tenants directory: %w", err)
	}
	var out []TenantInfo
	for _, e := range entries {
		id, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok || e.IsDir() {
			continue
		}
		t, err := p.open(id)
		if err != nil {
			for _, o := range out {
				_ = o.Store.Close()
			}
			return nil, err
		}
		out = append(out, t)
	}
	return out, nil
}

func (p PebbleTenants) open(id string) (TenantInfo, error) {
	raw, err := os.ReadFile(filepath.Join(p.Dir, id+".json"))
	if err != nil {
		return TenantInfo{}, fmt.Errorf("tenant %q: %w", id, err)
	}
	var f tenantFile
	if err := json.Unmarshal(raw, &f); err != nil || f.ID != id {
		return TenantInfo{}, fmt.Errorf("tenant %q: %s is not a tenant description", id, filepath.Join(p.Dir, id+".json"))
	}
	t := TenantInfo{ID: f.ID, Name: f.Name}
	if err := t.Created.UnmarshalText([]byte(f.Created)); err != nil {
		return TenantInfo{}, fmt.Errorf("tenant %q: creation time %q: %w", id, f.Created, err)
	}
	if t.Store, err = pebble.Open(filepath.Join(p.Dir, id), p.Options); err != nil {
		return TenantInfo{}, fmt.Errorf("tenant %q: %w", id, err)
	}
	return t, nil
}

// Create opens a new tenant's directory, then records it.
func (p PebbleTenants) Create(t TenantInfo) (store.Store, error) {
	if err := os.MkdirAll(p.Dir, 0o755); err != nil {
		return nil, err
	}
	st, err := pebble.Open(filepath.Join(p.Dir, t.ID), p.Options)
	if err != nil {
		return nil, err
	}
	created, _ := t.Created.MarshalText()
	raw, _ := json.Marshal(tenantFile{ID: t.ID, Name: t.Name, Created: string(created)})
	tmp := filepath.Join(p.Dir, t.ID+".json.tmp")
	err = os.WriteFile(tmp, raw, 0o644)
	if err == nil {
		err = os.Rename(tmp, filepath.Join(p.Dir, t.ID+".json"))
	}
	if err != nil {
		_ = st.Close()
		_ = os.RemoveAll(filepath.Join(p.Dir, t.ID))
		return nil, err
	}
	return st, nil
}

// Remove deletes a tenant's description first (so a crash midway leaves no tenant),
// then its data.
func (p PebbleTenants) Remove(id string) error {
	if err := os.Remove(filepath.Join(p.Dir, id+".json")); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return os.RemoveAll(filepath.Join(p.Dir, id))
}

// tenantOpTimeout bounds creating, listing or deleting tenants in a SQL database.
const tenantOpTimeout = time.Minute

// SQLTenants keeps each tenant in a schema of its own in the server's PostgreSQL or
// CockroachDB database (sqlstore.Tenants), so tenants are as durable as t1's data
// and survive restarts.
type SQLTenants struct{ Tenants sqlstore.Tenants }

// Existing reopens every tenant in the database.
func (s SQLTenants) Existing() ([]TenantInfo, error) {
	ctx, cancel := context.WithTimeout(context.Background(), tenantOpTimeout)
	defer cancel()
	list, err := s.Tenants.Existing(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]TenantInfo, len(list))
	for i, t := range list {
		out[i] = TenantInfo{ID: t.ID, Name: t.Name, Created: t.Created, Store: t.Store}
	}
	return out, nil
}

// Create makes the tenant's schema and opens its store.
func (s SQLTenants) Create(t TenantInfo) (store.Store, error) {
	ctx, cancel := context.WithTimeout(context.Background(), tenantOpTimeout)
	defer cancel()
	return s.Tenants.Create(ctx, sqlstore.Tenant{ID: t.ID, Name: t.Name, Created: t.Created})
}

// Remove drops the tenant's schema with all its data.
func (s SQLTenants) Remove(id string) error {
	ctx, cancel := context.WithTimeout(context.Background(), tenantOpTimeout)
	defer cancel()
	return s.Tenants.Remove(ctx, id)
}
