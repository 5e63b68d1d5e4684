// Package pgtest runs a throwaway PostgreSQL server for tests: it finds initdb and
// pg_ctl under /usr/lib/postgresql/*/bin, creates a cluster in a temporary directory
// (as the "postgres" system user when the tests run as root, since PostgreSQL refuses
// to run as root), starts it on 127.0.0.1 and a free port with fsync off, and stops
// and removes it when the tests end. Tests get a fresh database per test, copied from
// a template.
//
// A package's TestMain calls Main; its tests call Get. Without PostgreSQL installed,
// tests are skipped with a hint to run scripts/ensure-postgres.sh, except under CI=true,
// where they fail.
package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Server is a running throwaway cluster.
type Server struct {
	dir  string // temporary directory: data/, the socket, logs
	bin  string // directory of initdb, pg_ctl, postgres
	port int
	cred *syscall.Credential // the user the server runs as; nil: this process's user

	mu        sync.Mutex
	templates map[string]error // guarded by mu; template databases made, with their setup error
	databases int              // guarded by mu; databases made, for unique names
}

const superuser = "latch"

var (
	shared    *Server
	sharedErr error
)

// Main starts the shared server, runs the tests and removes the server. A TestMain
// passes its result to os.Exit.
func Main(m *testing.M) int {
	shared, sharedErr = Start()
	code := m.Run()
	if shared != nil {
		if err := shared.Close(); err != nil {
			fmt.Fprintln(os.Stderr, "pgtest:", err)
		}
	}
	return code
}

// errNotInstalled means the PostgreSQL binaries are absent.
var errNotInstalled = errors.New("PostgreSQL is not installed (no initdb under /usr/lib/postgresql/*/bin): run scripts/ensure-postgres.sh")

// Get returns the shared server, skipping the test when PostgreSQL is not installed
// (failing it under CI=true) and failing it when the server could not start.
func Get(t testing.TB) *Server {
	t.Helper()
	switch {
	case errors.Is(sharedErr, errNotInstalled) && os.Getenv("CI") != "true":
		t.Skip(sharedErr)
	case sharedErr != nil:
		t.Fatal(sharedErr)
	case shared == nil:
		t.Fatal("pgtest: the package's TestMain does not call pgtest.Main")
	}
	return shared
}

// Own starts a server for t alone, one it may stop and restart, and removes it when t
// ends. Like Get it skips t when PostgreSQL is not installed, and fails it under CI=true.
func Own(t testing.TB) *Server {
	t.Helper()
	if _, err := FindBin(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	s, err := Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("pgtest: %v", err)
		}
	})
	return s
}

// FindBin returns the newest /usr/lib/postgresql/*/bin holding initdb.
func FindBin() (string, error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return versionOf(dirs[i]) > versionOf(dirs[j]) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d, nil
		}
	}
	return "", errNotInstalled
}

func versionOf(binDir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return v
}

// Start creates and starts a new cluster.
func Start() (*Server, error) {
	bin, err := FindBin()
	if err != nil {
		return nil, err
	}
	removeStale()
	s := &Server{bin: bin, templates: map[string]error{}}
	if os.Geteuid() == 0 {
		if s.cred, err = serverUser(); err != nil {
			return nil, err
		}
	}
	if s.dir, err = os.MkdirTemp("", "latch-pgtest-"); err != nil {
		return nil, err
	}
	if err := s.init(); err != nil {
		os.RemoveAll(s.dir)
		return nil, err
	}
	if err := s.StartServer(); err != nil {
		os.RemoveAll(s.dir)
		return nil, err
	}
	return s, nil
}

// serverUser returns the credentials of the "postgres" system user, creating the
// user when it does not exist.
func serverUser() (*syscall.Credential, error) {
	u, err := user.Lookup("postgres")
	if err != nil {
		out, uerr := exec.Command("useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", "postgres").CombinedOutput()
		if uerr != nil {
			return nil, fmt.Errorf("pgtest: running as root needs a non-root user for PostgreSQL; useradd postgres: %v: %s", uerr, out)
		}
		if u, err = user.Lookup("postgres"); err != nil {
			return nil, err
		}
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

func (s *Server) init() error {
	if err := os.WriteFile(filepath.Join(s.dir, "owner.pid"), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		return err
	}
	if s.cred != nil {
		if err := os.Chown(s.dir, int(s.cred.Uid), int(s.cred.Gid)); err != nil {
			return err
		}
	}
	return s.run("initdb", "-D", s.dataDir(), "-U", superuser, "-A", "trust", "-E", "UTF8",
		"--locale=C", "--no-sync", "--no-instructions")
}

func (s *Server) dataDir() string { return filepath.Join(s.dir, "data") }

// run runs one of the server's programs as the server's user. Output goes to a file,
// not a pipe: pg_ctl's server inherits it and would keep a pipe open forever.
func (s *Server) run(program string, args ...string) error {
	logPath := filepath.Join(s.dir, program+".out")
	out, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer out.Close()
	if s.cred != nil {
		_ = os.Chown(logPath, int(s.cred.Uid), int(s.cred.Gid))
	}
	cmd := exec.Command(filepath.Join(s.bin, program), args...)
	cmd.Dir = s.dir
	cmd.Stdout, cmd.Stderr = out, out
	if s.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred}
	}
	if err := cmd.Run(); err != nil {
		text, _ := os.ReadFile(logPath)
		return fmt.Errorf("pgtest: %s %s: %v\n%s", program, strings.Join(args, " "), err, text)
	}
	return nil
}

// StartServer starts the cluster's server (again, after StopServer) on its port.
func (s *Server) StartServer() error {
	if s.port == 0 {
		port, err := freePort()
		if err != nil {
			return err
		}
		s.port = port
	}
	opts := fmt.Sprintf("-c listen_addresses=127.0.0.1 -p %d -c unix_socket_directories=%s -c fsync=off "+
		"-c synchronous_commit=off -c full_page_writes=off -c max_connections=300", s.port, s.dir)
	return s.run("pg_ctl", "-D", s.dataDir(), "-l", filepath.Join(s.dir, "server.log"), "-w", "-t", "60", "-o", opts, "start")
}

// StartReplica makes a streaming hot-standby replica of s with pg_basebackup and
// starts it on a port of its own. Databases created on s later appear on it too.
func (s *Server) StartReplica() (*Server, error) {
	r := &Server{bin: s.bin, cred: s.cred, templates: map[string]error{}}
	var err error
	if r.dir, err = os.MkdirTemp("", "latch-pgtest-"); err != nil {
		return nil, err
	}
	err = os.WriteFile(filepath.Join(r.dir, "owner.pid"), []byte(strconv.Itoa(os.Getpid())), 0o644)
	if err == nil && r.cred != nil {
		err = os.Chown(r.dir, int(r.cred.Uid), int(r.cred.Gid))
	}
	if err == nil {
		err = r.run("pg_basebackup", "-h", "127.0.0.1", "-p", strconv.Itoa(s.port), "-U", superuser,
			"-D", r.dataDir(), "-R", "-X", "stream", "--no-sync")
	}
	if err == nil {
		err = r.StartServer()
	}
	if err != nil {
		os.RemoveAll(r.dir)
		return nil, err
	}
	return r, nil
}

// StartWithReplica starts a cluster of t's own and a streaming replica of it, both
// removed when t ends, for tests that pause or stop replication. It skips or fails t
// as Get does.
func StartWithReplica(t testing.TB) (primary, replica *Server) {
	t.Helper()
	Get(t)
	primary, err := Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = primary.Close() })
	if replica, err = primary.StartReplica(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = replica.Close() })
	return primary, replica
}

// StopServer stops the server, disconnecting every client (pg_ctl stop -m fast).
func (s *Server) StopServer() error {
	return s.run("pg_ctl", "-D", s.dataDir(), "-m", "fast", "-w", "stop")
}

// Close stops the server and removes its directory.
func (s *Server) Close() error {
	var err error
	// A server its test stopped (StopServer) has no pid file and is not stopped again.
	if _, statErr := os.Stat(filepath.Join(s.dataDir(), "postmaster.pid")); statErr == nil {
		err = s.run("pg_ctl", "-D", s.dataDir(), "-m", "immediate", "-w", "stop")
	}
	if rmErr := os.RemoveAll(s.dir); rmErr != nil && err == nil {
		err = rmErr
	}
	return err
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// removeStale stops and removes clusters left by test processes that died without
// cleaning up (a timeout, a kill).
func removeStale() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), "latch-pgtest-*"))
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join(d, "owner.pid"))
		if err != nil {
			continue
		}
		pid, _ := strconv.Atoi(string(b))
		if pid <= 0 || syscall.Kill(pid, 0) == nil || errors.Is(syscall.Kill(pid, 0), syscall.EPERM) {
			continue // its owner is alive
		}
		bin, err := FindBin()
		if err == nil {
			stale := &Server{dir: d, bin: bin}
			if os.Geteuid() == 0 {
				stale.cred, _ = serverUser()
			}
			_ = stale.Close()
		} else {
			_ = os.RemoveAll(d)
		}
	}
}

// URI returns the connection URI of database db.
func (s *Server) URI(db string) string {
	return fmt.Sprintf("postgres://%s@127.0.0.1:%d/%s?sslmode=disable", superuser, s.port, db)
}

// Database returns the name of the database in uri, a URI from URI or NewDatabase: a
// replica's URI of the same database is replica.URI(Database(uri)).
func Database(uri string) string {
	u, err := url.Parse(uri)
	if err != nil {
		return ""
	}
	return strings.TrimPrefix(u.Path, "/")
}

// Port is the server's TCP port.
func (s *Server) Port() int { return s.port }

// Exec runs sql in database db.
func (s *Server) Exec(ctx context.Context, db, sql string, args ...any) error {
	conn, err := pgx.Connect(ctx, s.URI(db))
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, sql, args...)
	return err
}

// NewDatabase creates an empty database for t, copied from the template database
// that setup prepares (setup runs once per template name, given the template's URI;
// an empty name copies template0), and drops it when t ends. It returns the URI.
func (s *Server) NewDatabase(t testing.TB, template string, setup func(ctx context.Context, uri string) error) string {
	t.Helper()
	ctx := context.Background()
	if template == "" {
		template = "template0"
	} else if err := s.template(ctx, template, setup); err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	s.databases++
	name := fmt.Sprintf("test_%d", s.databases)
	s.mu.Unlock()
	if err := s.Exec(ctx, "postgres", fmt.Sprintf("CREATE DATABASE %s TEMPLATE %s", name, pgx.Identifier{template}.Sanitize())); err != nil {
		t.Fatalf("pgtest: creating database %s: %v", name, err)
	}
	t.Cleanup(func() {
		if err := s.Exec(ctx, "postgres", "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Errorf("pgtest: dropping database %s: %v", name, err)
		}
	})
	return s.URI(name)
}

func (s *Server) template(ctx context.Context, name string, setup func(ctx context.Context, uri string) error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err, done := s.templates[name]; done {
		return err
	}
	err := s.Exec(ctx, "postgres", "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()+" TEMPLATE template0")
	if err == nil && setup != nil {
		err = setup(ctx, s.URI(name))
	}
	if err != nil {
		err = fmt.Errorf("pgtest: preparing template database %s: %w", name, err)
	}
	s.templates[name] = err
	return err
}

// WaitReady waits until the server accepts connections or ctx ends.
func (s *Server) WaitReady(ctx context.Context) error {
	for {
		err := s.Exec(ctx, "postgres", "SELECT 1")
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(20 * time.Millisecond):
		}
	}
}
