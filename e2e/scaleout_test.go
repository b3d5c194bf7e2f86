package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// scaleOut turns on TestScaleOut, the measurement behind
// docs/benchmarks/scale-out.md; scaleOutEvents sizes it.
var (
	scaleOut       = flag.Bool("scaleout", false, "run TestScaleOut, the front-end cost and parity measurement (docs/benchmarks/scale-out.md)")
	scaleOutEvents = flag.Int("scaleout.events", 5000, "TestScaleOut: events published per set-up")
)

// scaleOutResult is one set-up's figures.
type scaleOutResult struct {
	Name          string  `json:"name"`
	Events        int     `json:"events"`
	IngestPerSec  float64 `json:"ingest_per_second"`
	ReqP50ms      float64 `json:"req_p50_ms"`
	ReqP99ms      float64 `json:"req_p99_ms"`
	CrossP50ms    float64 `json:"cross_front_end_p50_ms,omitempty"`
	CrossP99ms    float64 `json:"cross_front_end_p99_ms,omitempty"`
	RelayCPUPer1k float64 `json:"relay_cpu_seconds_per_1000"`
	DBCPUPer1k    float64 `json:"db_cpu_seconds_per_1000"`
	IdleCPUPct    float64 `json:"idle_cpu_percent"`
}

// TestScaleOut measures, on this machine and in one run, a Pebble node,
// one front-end over PostgreSQL and three: ingest (16 clients, one EVENT
// at a time each, spread over the front-ends), REQ latency to EOSE over
// a mix of filters, the delay from an OK at one front-end to the event at
// a subscription on another, CPU-seconds per 1,000 events of the relay
// processes and of PostgreSQL, and the CPU an idle set-up uses. Run it
// without -race:
//
//	go test -count=1 -run TestScaleOut -scaleout -scaleout.events 5000 -v ./e2e/
func TestScaleOut(t *testing.T) {
	if !*scaleOut {
		t.Skip("a measurement, not a check: -scaleout runs it (docs/benchmarks/scale-out.md)")
	}
	needBinary(t)
	n := *scaleOutEvents
	var results []scaleOutResult

	pebbleHome := newHome(t, nodeConfig(map[string]string{"max_limit": "100000",
		"req_ms_per_second": "1000000", "ip_req_ms_per_second": "1000000", "req_rows_per_second": "100000000", "ip_req_rows_per_second": "100000000"}))
	pn := startFrontEnd(t, pebbleHome)
	results = append(results, measureSetUp(t, "pebble", []*node{pn}, nil, n))
	pn.stop()

	for _, count := range []int{1, 3} {
		url := frontEndsDB(t)
		homes := frontEndHomes(t, url, count, "")
		var fes []*node
		for _, h := range homes {
			fes = append(fes, startFrontEnd(t, h))
		}
		results = append(results, measureSetUp(t, fmt.Sprintf("postgres, %d front-end(s)", count), fes, postgresPIDs(t, url), n))
		for _, fe := range fes {
			fe.stop()
		}
	}
	data, _ := json.MarshalIndent(results, "", "  ")
	t.Logf("results:\n%s", data)
	for _, r := range results {
		t.Logf("%-26s ingest %7.0f/s  REQ p50 %6.1f ms p99 %6.1f ms  cross p50 %6.1f ms p99 %6.1f ms  CPU/1k relay %.2f s db %.2f s  idle %.2f %%",
			r.Name, r.IngestPerSec, r.ReqP50ms, r.ReqP99ms, r.CrossP50ms, r.CrossP99ms, r.RelayCPUPer1k, r.DBCPUPer1k, r.IdleCPUPct)
	}
}

// postgresPIDs returns a function listing the PIDs of the PostgreSQL
// server of url (the postmaster and its backends).
func postgresPIDs(t *testing.T, url string) func() []int {
	port := url[strings.LastIndex(url, ":")+1:]
	port = port[:strings.IndexByte(port, '/')]
	return func() []int {
		var pids []int
		entries, _ := os.ReadDir("/proc")
		var master int
		for _, e := range entries {
			pid, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			cmd, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
			if bytes.Contains(cmd, []byte("postgres")) && bytes.Contains(cmd, []byte("\x00-p\x00"+port+"\x00")) {
				master = pid
			}
		}
		if master == 0 {
			return nil
		}
		pids = append(pids, master)
		for _, e := range entries {
			pid, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			if stat, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "stat")); ppidOf(stat) == master {
				pids = append(pids, pid)
			}
		}
		return pids
	}
}

// ppidOf reads the parent PID from /proc/PID/stat.
func ppidOf(stat []byte) int {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 2 {
		return 0
	}
	p, _ := strconv.Atoi(f[1])
	return p
}

// cpuSeconds is the user and system CPU time of the processes, children
// that exited included.
func cpuSeconds(pids []int) float64 {
	var total float64
	for _, pid := range pids {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		i := bytes.LastIndexByte(stat, ')')
		f := strings.Fields(string(stat[i+1:]))
		// utime, stime, cutime, cstime are fields 14-17 (1-based),
		// 12-15 after the command.
		for _, k := range []int{11, 12, 13, 14} {
			v, _ := strconv.ParseFloat(f[k], 64)
			total += v / 100 // USER_HZ
		}
	}
	return total
}

// measureSetUp publishes n events over the front-ends and measures.
func measureSetUp(t *testing.T, name string, fes []*node, dbPIDs func() []int, n int) scaleOutResult {
	t.Helper()
	r := scaleOutResult{Name: name, Events: n}
	var urls []string
	relayPIDs := func() []int {
		var pids []int
		for _, fe := range fes {
			pids = append(pids, fe.cmd.Process.Pid)
		}
		return pids
	}
	for _, fe := range fes {
		urls = append(urls, fe.url)
	}
	db := func() float64 {
		if dbPIDs == nil {
			return 0
		}
		return cpuSeconds(dbPIDs())
	}
	tag := randomContent("so")[3:]
	evs, _ := signMany(t, n, tag)

	relay0, db0 := cpuSeconds(relayPIDs()), db()
	start := time.Now()
	publishAll(t, urls, 16/len(urls)+1, evs)
	elapsed := time.Since(start)
	r.IngestPerSec = float64(n) / elapsed.Seconds()
	r.RelayCPUPer1k = (cpuSeconds(relayPIDs()) - relay0) / float64(n) * 1000
	r.DBCPUPer1k = (db() - db0) / float64(n) * 1000

	// REQ latency: a mix of shapes, one REQ at a time per client.
	var lat []time.Duration
	var mu sync.Mutex
	var wg sync.WaitGroup
	for c := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ws, err := dial(context.Background(), urls[c%len(urls)])
			if err != nil {
				t.Error(err)
				return
			}
			defer ws.Close()
			for q := range 100 {
				ev := evs[(q*37+c*101)%len(evs)]
				filters := []map[string]any{
					{"ids": []string{ev.ID}},
					{"authors": []string{ev.PubKey}, "kinds": []int{1}, "limit": 20},
					{"#t": []string{tag}, "limit": 50},
					{"kinds": []int{1}, "limit": 100},
				}
				s := time.Now()
				if _, err := storedEvents(ws, fmt.Sprintf("q%d", q), filters[q%len(filters)]); err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				lat = append(lat, time.Since(s))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	r.ReqP50ms, r.ReqP99ms = percentileMS(lat, 50), percentileMS(lat, 99)

	// Cross-front-end delivery: OK at the first, EVENT at a subscription
	// on the last (the same front-end when there is one).
	sub, err := dial(context.Background(), urls[len(urls)-1])
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	crossTag := randomContent("x")[2:]
	req, _ := json.Marshal([]any{"REQ", "x", map[string]any{"#t": []string{crossTag}}})
	sub.WriteMessage(websocket.TextMessage, req)
	for {
		_, data, err := sub.ReadMessage()
		if err != nil {
			t.Fatal(err)
		}
		if bytes.HasPrefix(data, []byte(`["EOSE"`)) {
			break
		}
	}
	pub, err := dial(context.Background(), urls[0])
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	u, _ := newUser()
	var cross []time.Duration
	for i := range 200 {
		ev, _ := u.sign(1, fmt.Sprintf("cross %d", i), [][]string{{"t", crossTag}})
		if ok, err := publishOne(pub, ev); err != nil || !ok.Accepted {
			t.Fatalf("%+v %v", ok, err)
		}
		acked := time.Now()
		sub.SetReadDeadline(time.Now().Add(30 * time.Second))
		for {
			_, data, err := sub.ReadMessage()
			if err != nil {
				t.Fatal(err)
			}
			if bytes.Contains(data, []byte(ev.ID)) {
				break
			}
		}
		cross = append(cross, time.Since(acked))
	}
	r.CrossP50ms, r.CrossP99ms = percentileMS(cross, 50), percentileMS(cross, 99)

	// Idle: no client, ten seconds.
	sub.Close()
	pub.Close()
	time.Sleep(2 * time.Second)
	i0 := cpuSeconds(relayPIDs()) + db()
	time.Sleep(10 * time.Second)
	r.IdleCPUPct = (cpuSeconds(relayPIDs()) + db() - i0) / 10 * 100
	return r
}

func percentileMS(d []time.Duration, p int) float64 {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	i := min(len(s)-1, len(s)*p/100)
	return float64(s[i].Microseconds()) / 1000
}
