package netem

import (
	"bytes"
	"crypto/rand"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"
)

// echoServer echoes every connection until the test ends.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	return ln.Addr().String()
}

func TestIntegrityUnderLossAndBandwidth(t *testing.T) {
	p, err := New(echoServer(t), Config{Latency: 5 * time.Millisecond, Loss: 0.05, Bandwidth: 4 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	want := make([]byte, 256<<10)
	_, _ = rand.Read(want)
	go func() { _, _ = c.Write(want) }()
	got := make([]byte, len(want))
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("bytes changed or reordered in transit")
	}
	if s := p.Stats(); s.Up != int64(len(want)) || s.Down != int64(len(want)) || s.Conns != 1 {
		t.Fatalf("stats %+v, want %d each way over 1 connection", s, len(want))
	}
}

func TestLatencyIsALowerBound(t *testing.T) {
	p, err := New(echoServer(t), Config{Latency: 40 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	if _, err := c.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(c, make([]byte, 1)); err != nil {
		t.Fatal(err)
	}
	// The proxy holds each segment for Latency each way: the echo can
	// never come back sooner than the RTT.
	if rtt := time.Since(start); rtt < 80*time.Millisecond {
		t.Fatalf("echo came back after %s, before the 80 ms RTT", rtt)
	}
}

// TestBlackholeIsSilent: a blackholed connection neither delivers nor
// ends (no FIN, no RST), and Restore revives new connections only.
func TestBlackholeIsSilent(t *testing.T) {
	p, err := New(echoServer(t), Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	old, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	p.Blackhole()
	if _, err := old.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	_ = old.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	_, err = old.Read(make([]byte, 4))
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read on a blackholed connection: %v, want a timeout (no data, no FIN, no RST)", err)
	}
	p.Restore()
	fresh, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	if _, err := fresh.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	_ = fresh.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadFull(fresh, make([]byte, 4)); err != nil {
		t.Fatalf("new connection after Restore: %v", err)
	}
	_ = old.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	if _, err := old.Read(make([]byte, 4)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("old connection after Restore: %v, want it still silent", err)
	}
}
