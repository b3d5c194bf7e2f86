package iroh

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"fleetmesh.org/fleetmesh/identity"
)

// helperPIDs finds the helper processes the endpoint runs: the node
// processes whose environment names the endpoint's socket.
func helperPIDs(t *testing.T, e *Endpoint) []int {
	t.Helper()
	out, _ := exec.Command("pgrep", "-f", "helper.mjs").Output() // exit 1: none
	var pids []int
	for _, f := range strings.Fields(string(out)) {
		pid, _ := strconv.Atoi(f)
		env, err := os.ReadFile("/proc/" + f + "/environ")
		if err == nil && strings.Contains(string(env), "FLEETMESH_IROH_SOCK="+e.path+"\x00") {
			pids = append(pids, pid)
		}
	}
	return pids
}

// helperPID is the one helper process the endpoint runs.
func helperPID(t *testing.T, e *Endpoint) int {
	t.Helper()
	pids := helperPIDs(t, e)
	if len(pids) != 1 {
		t.Fatalf("helper processes for this endpoint: %v, want one", pids)
	}
	return pids[0]
}

// TestHelperKill9: a helper killed with SIGKILL is noticed and restarted
// with the same EndpointId, and a peer reaches the node again.
func TestHelperKill9(t *testing.T) {
	key, _ := identity.GenerateKey()
	ready := make(chan Info, 8)
	e, err := Start(Config{
		Key: key, Node: "node", HelperDir: helperDir(t), SocketDir: t.TempDir(),
		Bind:     []string{"127.0.0.1:0"},
		Handlers: map[string]Handler{testALPN: answer},
		OnReady:  func(i Info) { ready <- i },
	})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	peerKey, _ := identity.GenerateKey()
	p, err := Start(Config{
		Key: peerKey, Node: "node", HelperDir: helperDir(t), SocketDir: t.TempDir(),
		Bind:     []string{"127.0.0.1:0"},
		Handlers: map[string]Handler{testALPN: answer},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	exchange := func(info Info) error {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		s, err := p.Dial(ctx, Addr{ID: info.ID, Addrs: []string{loopback(info.Addrs)}}, testALPN)
		if err != nil {
			return err
		}
		defer s.Close()
		s.SetDeadline(time.Now().Add(20 * time.Second))
		s.Write([]byte("ping"))
		s.CloseWrite()
		// A stream that breaks reads as a short stream: the protocols
		// above frame their messages and see it so.
		got, err := io.ReadAll(s)
		if err == nil && string(got) != "go got: ping" {
			return fmt.Errorf("answer %q", got)
		}
		return err
	}
	for round := range 2 {
		var info Info
		select {
		case info = <-ready:
		case <-time.After(60 * time.Second):
			t.Fatalf("round %d: the helper did not serve", round)
		}
		if info.ID != key.EndpointID() {
			t.Fatalf("round %d: EndpointId %s, want %s", round, info.ID, key.EndpointID())
		}
		// The peer may still hold the connection the kill broke: a dial
		// fails until it notices, then succeeds.
		deadline := time.Now().Add(60 * time.Second)
		for {
			if _, up := p.Info(); up {
				if err = exchange(info); err == nil {
					break
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("round %d: no exchange after restart: %v", round, err)
			}
			time.Sleep(200 * time.Millisecond)
		}
		if round == 0 {
			if err := syscall.Kill(helperPID(t, e), syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
		}
	}
	if st := e.Stats(); st.Restarts != 1 {
		t.Fatalf("restarts %d, want 1", st.Restarts)
	}
}

// TestHelperThatCannotStartStops: a helper that exits before it serves
// (here: its UDP address is taken, a real bind failure of iroh) is started
// maxStartFailures times with backoff, then the supervisor stops: one
// ERROR names the cause, Failed says it, and no helper process is left.
func TestHelperThatCannotStartStops(t *testing.T) {
	taken, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	var logs recordLog
	key, _ := identity.GenerateKey()
	e, err := Start(Config{
		Key: key, Node: "node", HelperDir: helperDir(t), SocketDir: t.TempDir(),
		Bind:     []string{taken.LocalAddr().String()},
		Handlers: map[string]Handler{testALPN: answer},
		Log:      slog.New(&logs),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	deadline := time.Now().Add(120 * time.Second)
	for e.Failed() == nil {
		if time.Now().After(deadline) {
			t.Fatalf("the supervisor has not given up after 120s; restarts %d", e.Stats().Restarts)
		}
		time.Sleep(50 * time.Millisecond)
	}
	failed := e.Failed()
	if !errors.Is(failed, ErrUnavailable) || !strings.Contains(failed.Error(), "Address already in use") {
		t.Fatalf("Failed() = %v, want ErrUnavailable naming the bind failure", failed)
	}
	if st := e.Stats(); st.Restarts != maxStartFailures-1 {
		t.Fatalf("restarts %d, want %d", st.Restarts, maxStartFailures-1)
	}
	errs := logs.at(slog.LevelError)
	if len(errs) != 1 || !strings.Contains(errs[0], "Address already in use") {
		t.Fatalf("ERROR records %q, want one naming the cause", errs)
	}
	if _, up := e.Info(); up {
		t.Fatal("the endpoint says it serves")
	}
	if pids := helperPIDs(t, e); len(pids) != 0 {
		t.Fatalf("helper processes left after the supervisor gave up: %v", pids)
	}
}

// recordLog is a slog.Handler that keeps each record's level, message
// and attributes as one line.
type recordLog struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (l *recordLog) Enabled(context.Context, slog.Level) bool { return true }
func (l *recordLog) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.recs = append(l.recs, r.Clone())
	return nil
}
func (l *recordLog) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *recordLog) WithGroup(string) slog.Handler      { return l }

// at lists the records at level, each as its message and attributes.
func (l *recordLog) at(level slog.Level) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, r := range l.recs {
		if r.Level != level {
			continue
		}
		line := r.Message
		r.Attrs(func(a slog.Attr) bool { line += " " + a.String(); return true })
		out = append(out, line)
	}
	return out
}
