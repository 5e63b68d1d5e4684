package server

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"time"

	mv0 "github.com/authzed/authzed-go/proto/authzed/api/materialize/v0"
	v1 "github.com/authzed/authzed-go/proto/authzed/api/v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/latch-authz/latch/internal/materialize"
	"github.com/latch-authz/latch/internal/store"
)

// downloadPath is where the HTTP listener serves the permission sets a
// DownloadPermissionSets URL names.
const downloadPath = "/materialize/v0/permission-sets"

// downloadValidity is how long a download URL stays valid.
const downloadValidity = 15 * time.Minute

// downloadKey is the key download URLs are signed with: derived from the first API
// key, so that every node of a cluster (which shares its keys) accepts the URLs any
// of them issues; a random one per process when the server has no key.
func (s *Server) downloadKey() []byte {
	s.downloadKeyOnce.Do(func() {
		if len(s.auth.digests) > 0 {
			k := sha256.Sum256(append([]byte("latch materialize download\x00"), s.auth.digests[0][:]...))
			s.signKey = k[:]
			return
		}
		s.signKey = make([]byte, 32)
		_, _ = rand.Read(s.signKey)
	})
	return s.signKey
}

func (s *Server) downloadSignature(token string, expires int64) string {
	m := hmac.New(sha256.New, s.downloadKey())
	fmt.Fprintf(m, "%s\x00%d", token, expires)
	return hex.EncodeToString(m.Sum(nil))
}

// downloadUnavailableError: DownloadPermissionSets on a server without an HTTP listener.
type downloadUnavailableError struct{}

func (downloadUnavailableError) Error() string {
	return "DownloadPermissionSets answers with URLs on the HTTP listener, which is turned off: set --http-addr (or use LookupPermissionSets)"
}

// DownloadPermissionSets answers with one URL, on this server's HTTP listener, of the
// permission sets at the revision asked (or the newest): newline-delimited JSON, one
// PermissionSetChange (protojson, SET_OPERATION_ADDED) per line. The URL is signed
// and expires after downloadValidity; its host is the one the client reached the gRPC
// listener by, with the HTTP listener's port.
func (p *permissionSetsService) DownloadPermissionSets(ctx context.Context, req *mv0.DownloadPermissionSetsRequest) (*mv0.DownloadPermissionSetsResponse, error) {
	s := p.s
	if s.httpLis == nil {
		return nil, s.status(downloadUnavailableError{})
	}
	var rev store.Revision
	var err error
	if t := req.GetOptionalAtRevision(); t != nil {
		rev, err = decodeToken(t)
	} else {
		rev, err = s.store.HeadRevision(ctx)
	}
	if err != nil {
		return nil, s.status(err)
	}
	if _, err := s.store.Reader(ctx, rev); err != nil {
		return nil, s.status(err)
	}
	if err := s.permsets.Check(ctx, rev); err != nil {
		return nil, s.status(err)
	}
	tok := tokenFor(rev)
	expires := time.Now().Add(downloadValidity).Unix()
	q := url.Values{"revision": {tok.GetToken()}, "expires": {strconv.FormatInt(expires, 10)}}
	q.Set("signature", s.downloadSignature(tok.GetToken(), expires))
	u := url.URL{Scheme: "http", Host: s.downloadHost(ctx), Path: downloadPath, RawQuery: q.Encode()}
	if s.httpTLS != nil {
		u.Scheme = "https"
	}
	return &mv0.DownloadPermissionSetsResponse{
		Files:      []*mv0.File{{Name: fmt.Sprintf("permission-sets-%d.ndjson", rev), Url: u.String()}},
		Timestamp:  timestamppb.Now(),
		AtRevision: tok,
	}, nil
}

// downloadHost is the host the client reached this server by, with the HTTP port.
func (s *Server) downloadHost(ctx context.Context) string {
	_, port, _ := net.SplitHostPort(s.httpLis.Addr().String())
	host, _, _ := net.SplitHostPort(s.httpLis.Addr().String())
	if vals := metadata.ValueFromIncomingContext(ctx, ":authority"); len(vals) > 0 {
		if h, _, err := net.SplitHostPort(vals[0]); err == nil {
			host = h
		}
	}
	return net.JoinHostPort(host, port)
}

// downloadSurface admits downloads as expensive calls.
var downloadSurface = httpSurface{
	classOf: func(*http.Request) admissionClass { return classExpensive },
	overloaded: func(w http.ResponseWriter, err *overloadError) {
		http.Error(w, err.Error(), http.StatusTooManyRequests)
	},
}

// withDownloads serves the permission sets download URLs beside next.
func (s *Server) withDownloads(next http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET "+downloadPath, s.adm.guard(downloadSurface, http.HandlerFunc(s.serveDownload)))
	mux.Handle("/", next)
	return mux
}

// serveDownload writes the permission sets at the URL's revision, once its signature
// and expiry check.
func (s *Server) serveDownload(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	token := q.Get("revision")
	expires, err := strconv.ParseInt(q.Get("expires"), 10, 64)
	want := s.downloadSignature(token, expires)
	if err != nil || subtle.ConstantTimeCompare([]byte(want), []byte(q.Get("signature"))) != 1 {
		http.Error(w, "this download URL is not one this server signed: ask DownloadPermissionSets for a new one", http.StatusForbidden)
		return
	}
	if time.Now().Unix() > expires {
		http.Error(w, "this download URL has expired: ask DownloadPermissionSets for a new one", http.StatusForbidden)
		return
	}
	tok := &v1.ZedToken{Token: token}
	rev, err := decodeToken(tok)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	started := false
	var line []byte
	err = s.permsets.Lookup(r.Context(), rev, materialize.LookupPosition{}, func(pr materialize.Pair, _ materialize.LookupPosition) bool {
		started = true
		line, err = protojson.MarshalOptions{}.MarshalAppend(line[:0], setChange(pr, true, tok))
		if err != nil {
			return false
		}
		line = append(line, '\n')
		_, err = w.Write(line)
		return err == nil
	})
	if err != nil && !started {
		st := s.status(err)
		http.Error(w, st.Error(), http.StatusInternalServerError)
		return
	}
	if err != nil {
		// The status is sent; cut the body short so the client sees a broken download.
		panic(http.ErrAbortHandler)
	}
}
