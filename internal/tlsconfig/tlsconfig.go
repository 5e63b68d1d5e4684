// Package tlsconfig builds TLS configurations for latch's listeners from certificate
// and key files, reloading the pair when the files change so that certificates can
// be rotated without a restart.
package tlsconfig

import (
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"
)

// recheck is how often, at most, the files are looked at again: often enough that a
// rotated certificate is served within seconds, rarely enough that handshakes do not
// stat the files each time.
const recheck = time.Second

// Pair is a certificate and key loaded from files, reloaded when either file changes.
// A reload that fails (a half-written file during rotation, say) keeps the pair
// loaded before and is tried again at the next check.
type Pair struct {
	certPath, keyPath string

	mu      sync.Mutex
	cert    *tls.Certificate // guarded by mu
	prev    *tls.Certificate // guarded by mu: the pair before the last reload
	stamp   [2]fileStamp     // guarded by mu: the files as they were when cert was loaded
	checked time.Time        // guarded by mu
	lastErr error            // guarded by mu: the last reload's failure, reported once
	onError func(error)
}

type fileStamp struct {
	mod  time.Time
	size int64
}

// Load reads the pair at certPath and keyPath. onError, if not nil, is told of later
// reloads that fail (the old pair stays in use).
func Load(certPath, keyPath string, onError func(error)) (*Pair, error) {
	p := &Pair{certPath: certPath, keyPath: keyPath, onError: onError}
	stamp, err := p.stamps()
	if err != nil {
		return nil, err
	}
	cert, err := tls.LoadX509KeyPair(certPath, keyPath)
	if err != nil {
		return nil, fmt.Errorf("loading the TLS certificate %s and key %s: %w", certPath, keyPath, err)
	}
	p.cert, p.stamp, p.checked = &cert, stamp, time.Now()
	return p, nil
}

func (p *Pair) stamps() ([2]fileStamp, error) {
	var out [2]fileStamp
	for i, path := range []string{p.certPath, p.keyPath} {
		fi, err := os.Stat(path)
		if err != nil {
			return out, fmt.Errorf("reading TLS file: %w", err)
		}
		out[i] = fileStamp{mod: fi.ModTime(), size: fi.Size()}
	}
	return out, nil
}

// Certificate returns the current pair, reloading it first if the files changed.
func (p *Pair) Certificate() *tls.Certificate {
	p.mu.Lock()
	defer p.mu.Unlock()
	if time.Since(p.checked) < recheck {
		return p.cert
	}
	p.checked = time.Now()
	stamp, err := p.stamps()
	if err == nil && stamp == p.stamp {
		return p.cert
	}
	if err == nil {
		var cert tls.Certificate
		if cert, err = tls.LoadX509KeyPair(p.certPath, p.keyPath); err == nil {
			p.prev, p.cert, p.stamp, p.lastErr = p.cert, &cert, stamp, nil
			return p.cert
		}
	}
	if p.onError != nil && (p.lastErr == nil || p.lastErr.Error() != err.Error()) {
		p.onError(fmt.Errorf("reloading the TLS certificate %s (still serving the previous one): %w", p.certPath, err))
	}
	p.lastErr = err
	return p.cert
}

// Server returns a server configuration that presents the current pair.
func (p *Pair) Server() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return p.Certificate(), nil
		},
	}
}

// Self returns a client configuration for the process's own connections to a
// listener serving this pair (the HTTP gateway calling the gRPC API): it trusts
// exactly the certificate the pair presents (or presented until the last reload, for
// a handshake that raced a rotation), whatever names it carries.
func (p *Pair) Self() *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		// Verification is done below, against the pair itself, instead of against CAs
		// and a host name the process's own address need not match.
		InsecureSkipVerify: true,
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("the server presented no certificate")
			}
			cur := p.Certificate()
			p.mu.Lock()
			prev := p.prev
			p.mu.Unlock()
			for _, own := range []*tls.Certificate{cur, prev} {
				if own != nil && bytes.Equal(own.Certificate[0], cs.PeerCertificates[0].Raw) {
					return nil
				}
			}
			return errors.New("the server presented a certificate other than this process's own")
		},
	}
}
