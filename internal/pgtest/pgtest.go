// Package pgtest starts a throwaway PostgreSQL server on loopback for
// tests: initdb into a temporary directory, a free port on 127.0.0.1, the
// Unix socket in the same directory, and on Stop the server killed and the
// directory removed. One server serves a whole test binary (Main starts
// it lazily and stops it after m.Run); each test gets a fresh database of
// its own (Database), dropped when the test ends.
//
// It uses the Debian PostgreSQL server binaries
// (/usr/lib/postgresql/VERSION/bin; scripts/test.sh installs them in CI).
// PostgreSQL refuses to run as root, so as root the server's directory is
// given to the postgres user and initdb and pg_ctl run under runuser; as
// any other user they run as that user. The superuser is always named
// "postgres" and trusted on loopback: the server is for tests only.
//
// It is not a production set-up (fsync is off unless Options.Durable) and
// not a general process supervisor: no library here starts a PostgreSQL
// from Go tests, hence this small one.
package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Options choose how a server runs.
type Options struct {
	// Durable keeps fsync and synchronous commit on, as a production
	// server runs (benchmarks); tests leave it off for speed.
	Durable bool
}

// Server is one running PostgreSQL.
type Server struct {
	bin  string // the directory of initdb, pg_ctl
	dir  string // the data directory, also the socket directory
	port int
	asPG bool // run the binaries as the postgres user (we are root)

	dbs atomic.Int64
}

// BinDir returns the directory of the newest installed PostgreSQL's server
// binaries, or an error naming the package to install.
func BinDir() (string, error) {
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	if len(matches) == 0 {
		if p, err := exec.LookPath("initdb"); err == nil {
			return filepath.Dir(p), nil
		}
		return "", errors.New("pgtest: no PostgreSQL server binaries (/usr/lib/postgresql/*/bin/initdb); apt-get install postgresql")
	}
	sort.Slice(matches, func(i, j int) bool {
		vi, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(matches[i]))))
		vj, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(matches[j]))))
		return vi > vj
	})
	return filepath.Dir(matches[0]), nil
}

// Start initialises and starts a server. Stop it when done.
func Start(opts Options) (*Server, error) {
	bin, err := BinDir()
	if err != nil {
		return nil, err
	}
	s := &Server{bin: bin, asPG: os.Geteuid() == 0}
	if s.dir, err = s.tempDir(); err != nil {
		return nil, err
	}
	data := filepath.Join(s.dir, "data")
	if out, err := s.run("initdb", "-D", data, "-U", "postgres", "--auth=trust", "--no-sync", "-E", "UTF8", "--locale=C"); err != nil {
		os.RemoveAll(s.dir)
		return nil, fmt.Errorf("pgtest: initdb: %w\n%s", err, out)
	}
	if err := s.start(opts); err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}

// start starts the server of s.dir/data on a free port.
func (s *Server) start(opts Options) error {
	data := filepath.Join(s.dir, "data")
	settings := "-c listen_addresses=127.0.0.1 -c max_connections=200 -c log_min_messages=warning"
	if !opts.Durable {
		settings += " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
	}
	// A free port can be taken between choosing it and the server binding
	// it; a few tries make that harmless.
	for try := 0; ; try++ {
		port, err := freePort()
		if err == nil {
			s.port = port
			var out []byte
			out, err = s.run("pg_ctl", "-D", data, "-l", filepath.Join(s.dir, "log"), "-w", "-t", "60",
				"-o", fmt.Sprintf("-p %d -k %s %s", s.port, s.dir, settings), "start")
			if err != nil {
				log, _ := os.ReadFile(filepath.Join(s.dir, "log"))
				err = fmt.Errorf("pgtest: pg_ctl start: %w\n%s%s", err, out, log)
			}
		}
		if err == nil || try == 2 {
			return err
		}
	}
}

// StartReplica starts a streaming replica of s (pg_basebackup -R, then
// a hot standby on its own port), for tests of reads from a replica. Stop
// it when done.
func (s *Server) StartReplica(opts Options) (*Server, error) {
	dir, err := s.tempDir()
	if err != nil {
		return nil, err
	}
	r := &Server{bin: s.bin, dir: dir, asPG: s.asPG}
	if out, err := r.run("pg_basebackup", "-D", filepath.Join(dir, "data"), "-R", "-X", "stream", "-c", "fast",
		"-h", "127.0.0.1", "-p", strconv.Itoa(s.port), "-U", "postgres"); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("pgtest: pg_basebackup: %w\n%s", err, out)
	}
	if err := r.start(opts); err != nil {
		r.Stop()
		return nil, err
	}
	return r, nil
}

// tempDir makes a directory for a server's data and socket, owned by the
// user the server runs as.
func (s *Server) tempDir() (string, error) {
	dir, err := os.MkdirTemp("", "pgtest-")
	if err != nil {
		return "", fmt.Errorf("pgtest: %w", err)
	}
	if s.asPG {
		pg, err := user.Lookup("postgres")
		if err != nil {
			os.RemoveAll(dir)
			return "", fmt.Errorf("pgtest: running as root needs the postgres user (apt-get install postgresql): %w", err)
		}
		uid, _ := strconv.Atoi(pg.Uid)
		gid, _ := strconv.Atoi(pg.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			os.RemoveAll(dir)
			return "", fmt.Errorf("pgtest: %w", err)
		}
	}
	return dir, nil
}

func (s *Server) run(name string, args ...string) ([]byte, error) {
	path := filepath.Join(s.bin, name)
	var cmd *exec.Cmd
	if s.asPG {
		cmd = exec.Command("runuser", append([]string{"-u", "postgres", "--", path}, args...)...)
	} else {
		cmd = exec.Command(path, args...)
	}
	cmd.Dir = s.dir
	return cmd.CombinedOutput()
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("pgtest: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Stop kills the server and removes its directory.
func (s *Server) Stop() error {
	_, err := s.run("pg_ctl", "-D", filepath.Join(s.dir, "data"), "-m", "immediate", "-w", "stop")
	if err != nil && !s.running() {
		err = nil // it never started
	}
	return errors.Join(err, os.RemoveAll(s.dir))
}

func (s *Server) running() bool {
	_, err := os.Stat(filepath.Join(s.dir, "data", "postmaster.pid"))
	return err == nil
}

// URL returns the connection string of database db, over TCP on loopback.
func (s *Server) URL(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", s.port, db)
}

// Port is the server's TCP port on 127.0.0.1.
func (s *Server) Port() int { return s.port }

// CreateDatabase creates a new empty database and returns its URL.
func (s *Server) CreateDatabase(ctx context.Context) (string, error) {
	name := fmt.Sprintf("t%d_%d", os.Getpid(), s.dbs.Add(1))
	conn, err := pgx.Connect(ctx, s.URL("postgres"))
	if err != nil {
		return "", fmt.Errorf("pgtest: %w", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name+" TEMPLATE template0"); err != nil {
		return "", fmt.Errorf("pgtest: create database: %w", err)
	}
	return s.URL(name), nil
}

// DropDatabase drops the database of url, closing its connections.
func (s *Server) DropDatabase(ctx context.Context, url string) error {
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		return err
	}
	conn, err := pgx.Connect(ctx, s.URL("postgres"))
	if err != nil {
		return fmt.Errorf("pgtest: %w", err)
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{cfg.Database}.Sanitize()+" WITH (FORCE)")
	return err
}

var shared struct {
	mu      sync.Mutex
	inMain  bool
	srv     *Server
	err     error
	started bool
}

// Main runs a test binary's tests and then stops the shared server, if
// any test started it: call it from TestMain.
//
//	func TestMain(m *testing.M) { pgtest.Main(m) }
func Main(m *testing.M) {
	shared.mu.Lock()
	shared.inMain = true
	shared.mu.Unlock()
	code := m.Run()
	shared.mu.Lock()
	if shared.srv != nil {
		if err := shared.srv.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}
	shared.mu.Unlock()
	os.Exit(code)
}

// Shared returns the test binary's server, starting it on first use. The
// binary's TestMain must call Main, which stops it; otherwise the test
// fails, as the server would outlive the tests. Without PostgreSQL's
// server binaries the test is skipped, saying what to install.
func Shared(t testing.TB) *Server {
	t.Helper()
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if !shared.inMain {
		t.Fatal("pgtest: the package's TestMain must call pgtest.Main(m), which stops the shared server")
	}
	if _, err := BinDir(); err != nil {
		// scripts/test.sh installs PostgreSQL, so CI always runs these.
		t.Skip(err)
	}
	if !shared.started {
		shared.started = true
		shared.srv, shared.err = Start(Options{})
	}
	if shared.err != nil {
		t.Fatal(shared.err)
	}
	return shared.srv
}

// Database creates a fresh database on the shared server for t, dropped
// when t ends, and returns its URL.
func Database(t testing.TB) string {
	t.Helper()
	s := Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	url, err := s.CreateDatabase(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := s.DropDatabase(ctx, url); err != nil {
			t.Errorf("pgtest: drop database: %v", err)
		}
	})
	return url
}

// Terminate ends, from another connection, every backend connected to the
// database of url except the caller's own (pg_terminate_backend), as an
// administrator or a failover would; it returns how many it ended.
func Terminate(ctx context.Context, url string) (int, error) {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return 0, fmt.Errorf("pgtest: %w", err)
	}
	defer conn.Close(ctx)
	var n int
	err = conn.QueryRow(ctx, `SELECT count(*) FILTER (WHERE pg_terminate_backend(pid))::int FROM pg_stat_activity
		WHERE datname = current_database() AND pid <> pg_backend_pid()`).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("pgtest: terminate: %w", err)
	}
	return n, nil
}
