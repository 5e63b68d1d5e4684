package tlsconfig

import (
	"bytes"
	"crypto/tls"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/latch-authz/latch/internal/tlsconfig/tlstest"
)

// due makes the next Certificate call look at the files again.
func (p *Pair) due() {
	p.mu.Lock()
	p.checked = time.Time{}
	p.mu.Unlock()
}

func TestPairReloadsWhenTheFilesChange(t *testing.T) {
	dir := t.TempDir()
	certPath, keyPath := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	ca := tlstest.NewCA(t, dir)
	first := ca.Issue(t, certPath, keyPath)
	var reported []error
	p, err := Load(certPath, keyPath, func(err error) { reported = append(reported, err) })
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(p.Certificate().Certificate[0], first) {
		t.Fatal("the loaded certificate is not the one written")
	}

	second := ca.Issue(t, certPath, keyPath)
	if !bytes.Equal(p.Certificate().Certificate[0], first) {
		t.Fatal("reloaded before the recheck interval")
	}
	p.due()
	if !bytes.Equal(p.Certificate().Certificate[0], second) {
		t.Fatal("a rotated certificate was not reloaded")
	}

	// A half-written rotation keeps the pair in use, reported once.
	if err := os.WriteFile(certPath, []byte("-----BEGIN CERTIFICATE-----\ntrunc"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(certPath, time.Now().Add(time.Minute), time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		p.due()
		if !bytes.Equal(p.Certificate().Certificate[0], second) {
			t.Fatal("a broken certificate file replaced the working pair")
		}
	}
	if len(reported) != 1 || !strings.Contains(reported[0].Error(), "still serving the previous one") {
		t.Fatalf("reload failures reported: %v", reported)
	}
}

func TestLoadRefusesMissingOrMismatchedFiles(t *testing.T) {
	dir := t.TempDir()
	ca := tlstest.NewCA(t, dir)
	ca.Issue(t, filepath.Join(dir, "a.pem"), filepath.Join(dir, "a.key"))
	ca.Issue(t, filepath.Join(dir, "b.pem"), filepath.Join(dir, "b.key"))
	if _, err := Load(filepath.Join(dir, "missing.pem"), filepath.Join(dir, "a.key"), nil); err == nil || !strings.Contains(err.Error(), "missing.pem") {
		t.Errorf("missing certificate: %v", err)
	}
	if _, err := Load(filepath.Join(dir, "a.pem"), filepath.Join(dir, "b.key"), nil); err == nil || !strings.Contains(err.Error(), "a.pem") {
		t.Errorf("certificate and key that do not match: %v", err)
	}
}

// TestSelfTrustsOnlyTheOwnCertificate: the process's own client accepts its listener's
// certificate, and no other, however it is signed.
func TestSelfTrustsOnlyTheOwnCertificate(t *testing.T) {
	dir := t.TempDir()
	ca := tlstest.NewCA(t, dir)
	ca.Issue(t, filepath.Join(dir, "own.pem"), filepath.Join(dir, "own.key"))
	ca.Issue(t, filepath.Join(dir, "other.pem"), filepath.Join(dir, "other.key"))
	own, err := Load(filepath.Join(dir, "own.pem"), filepath.Join(dir, "own.key"), nil)
	if err != nil {
		t.Fatal(err)
	}
	other, err := Load(filepath.Join(dir, "other.pem"), filepath.Join(dir, "other.key"), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		server *Pair
		ok     bool
	}{{own, true}, {other, false}} {
		lis, err := tls.Listen("tcp", "127.0.0.1:0", c.server.Server())
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			conn, err := lis.Accept()
			if err == nil {
				_ = conn.(*tls.Conn).Handshake()
				_ = conn.Close()
			}
		}()
		conn, err := tls.Dial("tcp", lis.Addr().String(), own.Self())
		if (err == nil) != c.ok {
			t.Errorf("handshake with %s's listener: err %v, want success %v", map[bool]string{true: "own", false: "another"}[c.ok], err, c.ok)
		}
		if conn != nil {
			_ = conn.Close()
		}
		_ = lis.Close()
	}
}
