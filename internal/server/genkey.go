package server

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// GeneratedKeyFile is the file in pebble's data directory that keeps the key a server
// generated when it was started without one, so that a restart over the same data
// accepts the tokens its clients already hold.
const GeneratedKeyFile = "generated-preshared-key"

// generateKey returns a random preshared key for a server started without one.
func generateKey() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	return base64.RawURLEncoding.EncodeToString(b)
}

// generatedKey returns the key of a server configured with none: the one kept in the
// data directory of a pebble store when there is one (creating it, mode 0600, on the
// first start), or a new one for this run otherwise. path is the file it came from,
// "" when nothing keeps it.
func (c Config) generatedKey() (key, path string, err error) {
	if c.Datastore != nil || c.DatastoreEngine != "pebble" {
		return generateKey(), "", nil
	}
	dir := c.DatastoreURI
	if dir == "" {
		dir = DefaultDataDir
	}
	path = filepath.Join(dir, GeneratedKeyFile)
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		key = strings.TrimSpace(string(b))
		if key == "" {
			return "", "", fmt.Errorf("the generated key file %s is empty: delete it to generate a new key, or start with --grpc-preshared-key", path)
		}
		return key, path, nil
	case !errors.Is(err, fs.ErrNotExist):
		return "", "", fmt.Errorf("reading the generated key: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", "", fmt.Errorf("creating the data directory for the generated key: %w", err)
	}
	key = generateKey()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", "", fmt.Errorf("keeping the generated key: %w", err)
	}
	if _, err := f.WriteString(key + "\n"); err != nil {
		f.Close()
		return "", "", fmt.Errorf("keeping the generated key: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return "", "", fmt.Errorf("keeping the generated key: %w", err)
	}
	if err := f.Close(); err != nil {
		return "", "", fmt.Errorf("keeping the generated key: %w", err)
	}
	return key, path, nil
}
