package mesh

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	mocknet "github.com/libp2p/go-libp2p/p2p/net/mock"
)

// warnRecorder is a slog.Handler that keeps the warnings it is given.
type warnRecorder struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (w *warnRecorder) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }
func (w *warnRecorder) Handle(_ context.Context, r slog.Record) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.recs = append(w.recs, r.Clone())
	return nil
}
func (w *warnRecorder) WithAttrs([]slog.Attr) slog.Handler { return w }
func (w *warnRecorder) WithGroup(string) slog.Handler      { return w }

// named returns the attributes of the recorded warnings with message msg.
func (w *warnRecorder) named(msg string) []map[string]slog.Value {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []map[string]slog.Value
	for _, r := range w.recs {
		if r.Message != msg {
			continue
		}
		attrs := map[string]slog.Value{}
		r.Attrs(func(a slog.Attr) bool {
			attrs[a.Key] = a.Value
			return true
		})
		out = append(out, attrs)
	}
	return out
}

// TestBootstrapUnreachableLogged gives a node a bootstrap peer that does
// not exist: every failed dial is logged once, as a warning naming the
// peer's address and the error, and the wait before the next dial doubles
// from MaintainInterval up to RedialBackoff.
func TestBootstrapUnreachableLogged(t *testing.T) {
	mn := mocknet.New()
	defer mn.Close()
	self := addHost(t, mn, newKey(t), mockAddr(t, 1))
	ghost := &testNode{key: newKey(t), addr: mockAddr(t, 2)}
	boot := ghost.addr.String() + "/p2p/" + ghost.key.PeerID().String()
	cfg := testConfig()
	cfg.Bootstrap = []string{boot}
	cfg.MaintainInterval = 20 * time.Millisecond
	cfg.RedialBackoff = 160 * time.Millisecond
	rec := &warnRecorder{}
	self.start(t, cfg, Hooks{Logger: slog.New(rec)})
	defer self.close(t)

	want := []time.Duration{20, 40, 80, 160, 160}
	eventually(t, 30*time.Second, "five logged bootstrap failures", func() bool {
		return len(rec.named("mesh: bootstrap peer unreachable")) >= len(want)
	})
	logs := rec.named("mesh: bootstrap peer unreachable")
	for i, w := range want {
		l := logs[i]
		if got := l["retry_in"].Duration(); got != w*time.Millisecond {
			t.Errorf("failure %d: retry_in %v, want %v", i, got, w*time.Millisecond)
		}
		addrs, _ := l["addrs"].Any().([]string)
		if !slices.Contains(addrs, ghost.addr.String()) {
			t.Errorf("failure %d: addrs %v do not name %s", i, addrs, ghost.addr)
		}
		if e := l["err"].String(); strings.TrimSpace(e) == "" {
			t.Errorf("failure %d: no error logged", i)
		}
		if l["peer"].String() != ghost.key.PeerID().String() {
			t.Errorf("failure %d: peer %s, want %s", i, l["peer"], ghost.key.PeerID())
		}
	}
}
