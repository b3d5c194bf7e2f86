// Command memcurve draws a running node's memory curve as its store fills:
// it publishes signed notes of ten authors to the node's relay, one at a
// time, each after the previous one's OK, and at every checkpoint prints
// the node's VmRSS, RssAnon and RssFile (from /proc/PID/status) and, with
// -profiles, saves the node's heap profile (/debug/pprof/heap: run the
// node with --pprof) for `go tool pprof -base`.
//
// It tells a leak from fixed buffers filling: a buffer's growth stops at
// its size, a leak's does not, and the heap profile says which Go
// allocations grew. Every run is bounded by -events. Loopback only:
// point it at a node on this machine (the relay's rate limits off,
// events_per_second = 0).
//
//	memcurve -relay ws://127.0.0.1:7447 -pid PID -events 120000 -every 10000 -profiles DIR
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/gorilla/websocket"
	"github.com/nbd-wtf/go-nostr"
)

func main() {
	relay := flag.String("relay", "ws://127.0.0.1:7447", "the node's relay URL (loopback)")
	pid := flag.Int("pid", 0, "the node's process id, for /proc/PID/status")
	events := flag.Int("events", 100000, "notes to publish")
	every := flag.Int("every", 10000, "notes between checkpoints")
	profiles := flag.String("profiles", "", "a directory for the node's heap profile at each checkpoint (the node runs with --pprof)")
	flag.Parse()
	if *pid <= 0 || *every <= 0 || *events <= 0 {
		log.Fatal("memcurve: give -pid (the node's process id), and -events and -every above 0")
	}
	u, err := url.Parse(*relay)
	if err != nil || (u.Hostname() != "127.0.0.1" && u.Hostname() != "localhost" && u.Hostname() != "::1") {
		log.Fatalf("memcurve: -relay %q: give a loopback ws:// URL", *relay)
	}
	c, _, err := websocket.DefaultDialer.Dial(*relay, nil)
	if err != nil {
		log.Fatalf("memcurve: %v", err)
	}
	defer c.Close()
	keys := make([]string, 10)
	for i := range keys {
		keys[i] = nostr.GeneratePrivateKey()
	}
	body := strings.Repeat("a note of about the size people write ", 8)
	start := time.Now()
	for i := 0; ; i++ {
		if i%*every == 0 || i == *events {
			if *profiles != "" {
				if err := saveHeap(*relay, filepath.Join(*profiles, fmt.Sprintf("heap-%07d.pb.gz", i))); err != nil {
					log.Printf("memcurve: heap profile: %v", err)
				}
			}
			fmt.Printf("%7d events %6.0fs  %s\n", i, time.Since(start).Seconds(), status(*pid))
		}
		if i == *events {
			return
		}
		ev := nostr.Event{Kind: 1, CreatedAt: nostr.Now(), Content: fmt.Sprintf("%s%d", body, i), Tags: nostr.Tags{}}
		if err := ev.Sign(keys[i%len(keys)]); err != nil {
			log.Fatal(err)
		}
		msg, _ := json.Marshal([]any{"EVENT", ev})
		if err := c.WriteMessage(websocket.TextMessage, msg); err != nil {
			log.Fatalf("memcurve: publishing: %v", err)
		}
		if err := awaitOK(c); err != nil {
			log.Fatalf("memcurve: event %d: %v", i, err)
		}
	}
}

// awaitOK reads until the relay's OK and fails on OK false.
func awaitOK(c *websocket.Conn) error {
	for {
		_, data, err := c.ReadMessage()
		if err != nil {
			return err
		}
		var msg []json.RawMessage
		var typ string
		if json.Unmarshal(data, &msg) != nil || len(msg) < 3 || json.Unmarshal(msg[0], &typ) != nil || typ != "OK" {
			continue
		}
		var ok bool
		json.Unmarshal(msg[2], &ok)
		if !ok {
			return fmt.Errorf("refused: %s (set [relay] events_per_second = 0)", data)
		}
		return nil
	}
}

// status is the node's resident memory, from /proc/PID/status.
func status(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return err.Error()
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		for _, k := range []string{"VmRSS:", "RssAnon:", "RssFile:"} {
			if strings.HasPrefix(l, k) {
				out = append(out, strings.Join(strings.Fields(l), " "))
			}
		}
	}
	return strings.Join(out, ", ")
}

// saveHeap writes the node's heap profile to path.
func saveHeap(relay, path string) error {
	base := "http" + strings.TrimPrefix(relay, "ws")
	resp, err := http.Get(strings.TrimSuffix(base, "/") + "/debug/pprof/heap")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s (run the node with --pprof)", resp.Status)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
