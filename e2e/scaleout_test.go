package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/jackc/pgx/v5"

	"fleetmesh.org/fleetmesh/internal/pgtest"
)

// scaleOut turns on TestScaleOut, the measurement behind
// docs/benchmarks/scale-out.md; scaleOutEvents sizes it and
// scaleOutOrder names the set-ups and the order they run in.
var (
	scaleOut       = flag.Bool("scaleout", false, "run TestScaleOut, the front-end cost and parity measurement (docs/benchmarks/scale-out.md)")
	scaleOutEvents = flag.Int("scaleout.events", 5000, "TestScaleOut: events published per set-up")
	scaleOutOrder  = flag.String("scaleout.order", "pebble,khatru,khatru-idle80,postgres1,postgres3", "TestScaleOut: the set-ups, in the order they run: pebble, khatru (khatru on eventstore's PostgreSQL backend at its defaults), khatru-idle80 (the same keeping 80 idle connections), postgres1, postgres3 (fleetmesh front-ends over PostgreSQL)")
)

// scaleOutResult is one set-up's figures.
type scaleOutResult struct {
	Name         string  `json:"name"`
	Events       int     `json:"events"`
	IngestPerSec float64 `json:"ingest_per_second"`
	ReqP50ms     float64 `json:"req_p50_ms"`
	ReqP99ms     float64 `json:"req_p99_ms"`
	// ReqByShape is p50 and p99 in ms for each filter shape.
	ReqByShape    map[string][2]float64 `json:"req_p50_p99_ms_by_shape"`
	CrossP50ms    float64               `json:"cross_front_end_p50_ms,omitempty"`
	CrossP99ms    float64               `json:"cross_front_end_p99_ms,omitempty"`
	RelayCPUPer1k float64               `json:"relay_cpu_seconds_per_1000"`
	DBCPUPer1k    float64               `json:"db_cpu_seconds_per_1000"`
	IdleCPUPct    float64               `json:"idle_cpu_percent"`
	// IdleRelayCPUPct is IdleCPUPct's share in the relay processes: the
	// rest is the database server's, autovacuum of an earlier set-up's
	// database on the shared server included.
	IdleRelayCPUPct float64 `json:"idle_relay_cpu_percent"`
	// DBSessions is how many sessions the set-up opened to its database
	// (pg_stat_database.sessions), start-up and every phase included.
	DBSessions int64 `json:"db_sessions,omitempty"`
	// ReqOverLimit counts REQs answered with more distinct events than
	// their limit before EOSE.
	ReqOverLimit int `json:"req_over_limit,omitempty"`
}

// scaleOutSetUp is a relay set-up under measurement: its client URLs
// and the PIDs of its relay processes.
type scaleOutSetUp struct {
	urls []string
	pids []int
}

// TestScaleOut measures, on this machine and in one run, a Pebble node,
// khatru v0.17.4 on eventstore's PostgreSQL backend (bench/cmd/khatru-relay
// --postgres), one fleetmesh front-end over PostgreSQL and three: ingest
// (16 clients, one EVENT at a time each, spread over the front-ends), REQ
// latency to EOSE over a mix of filters, the delay from an OK at one
// front-end to the event at a subscription on another, CPU-seconds per
// 1,000 events of the relay processes and of PostgreSQL, and the CPU an
// idle set-up uses. The PostgreSQL set-ups share one server (internal/
// pgtest), each on a database of its own. Run it without -race:
//
//	go test -count=1 -run TestScaleOut -v ./e2e/ -args -scaleout -scaleout.events 5000
func TestScaleOut(t *testing.T) {
	if !*scaleOut {
		t.Skip("a measurement, not a check: -scaleout runs it (docs/benchmarks/scale-out.md)")
	}
	needBinary(t)
	n := *scaleOutEvents
	order := strings.Split(*scaleOutOrder, ",")
	var khatruBin string
	if slices.ContainsFunc(order, func(s string) bool { return strings.HasPrefix(s, "khatru") }) {
		khatruBin = khatruRelayBin(t)
	}

	srv := startPostgres(t, "the scale-out measurement (apt-get install postgresql)")
	dbPIDs := postgresPIDs(t, srv.URL("postgres"))
	newDB := func() string { return newDatabase(t, srv) }

	var results []scaleOutResult
	for _, name := range order {
		switch name {
		case "pebble":
			home := newHome(t, nodeConfig(map[string]string{"max_limit": "100000",
				"req_ms_per_second": "1000000", "ip_req_ms_per_second": "1000000", "req_rows_per_second": "100000000", "ip_req_rows_per_second": "100000000"}))
			pn := startFrontEnd(t, home)
			results = append(results, measureSetUp(t, "pebble", frontEndSetUp(pn), nil, n))
			pn.stop()
		case "khatru", "khatru-idle80":
			url := newDB()
			args, label := []string{"--postgres", url}, "khatru, eventstore postgres"
			if name == "khatru-idle80" {
				args, label = append(args, "--postgres-idle", "80"), "khatru, postgres, 80 idle"
			}
			p := gwStart(t, "khatru-relay", khatruBin, args...)
			r := measureSetUp(t, label, scaleOutSetUp{urls: []string{p.url}, pids: []int{p.cmd.Process.Pid}}, dbPIDs, n)
			p.stop(t)
			r.DBSessions = dbSessions(t, srv, url)
			results = append(results, r)
		case "postgres1", "postgres3":
			count := int(name[len(name)-1] - '0')
			url := newDB()
			homes := frontEndHomes(t, url, count, "")
			var fes []*node
			for _, h := range homes {
				fes = append(fes, startFrontEnd(t, h))
			}
			r := measureSetUp(t, fmt.Sprintf("postgres, %d front-end(s)", count), frontEndSetUp(fes...), dbPIDs, n)
			for _, fe := range fes {
				fe.stop()
			}
			r.DBSessions = dbSessions(t, srv, url)
			results = append(results, r)
		default:
			t.Fatalf("-scaleout.order: unknown set-up %q (want pebble, khatru, postgres1 or postgres3)", name)
		}
	}
	data, _ := json.MarshalIndent(results, "", "  ")
	t.Logf("results:\n%s", data)
	for _, r := range results {
		t.Logf("%-28s ingest %7.0f/s  REQ p50 %6.1f ms p99 %6.1f ms  cross p50 %6.1f ms p99 %6.1f ms  CPU/1k relay %.2f s db %.2f s  idle %.2f %% (relays %.2f %%)  db sessions %d  REQs over limit %d",
			r.Name, r.IngestPerSec, r.ReqP50ms, r.ReqP99ms, r.CrossP50ms, r.CrossP99ms, r.RelayCPUPer1k, r.DBCPUPer1k, r.IdleCPUPct, r.IdleRelayCPUPct, r.DBSessions, r.ReqOverLimit)
	}
	// The ratios against khatru on the same server, this run.
	for _, k := range results {
		if !strings.HasPrefix(k.Name, "khatru") {
			continue
		}
		for _, r := range results {
			if strings.HasPrefix(r.Name, "postgres") {
				t.Logf("%s: ingest %.2fx (goal >= 1.5x), REQ p99 %.2fx (goal <= 0.8x), REQ p50 %.2fx, CPU/1k relay+db %.2fx",
					r.Name+" / "+k.Name, r.IngestPerSec/k.IngestPerSec, r.ReqP99ms/k.ReqP99ms, r.ReqP50ms/k.ReqP50ms,
					(r.RelayCPUPer1k+r.DBCPUPer1k)/(k.RelayCPUPer1k+k.DBCPUPer1k))
			}
		}
	}
}

// dbSessions is how many sessions have been opened to the database of url
// (pg_stat_database.sessions; a session's figures count once it ends).
func dbSessions(t *testing.T, srv *pgtest.Server, url string) int64 {
	t.Helper()
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	conn := pgConnect(t, srv.URL("postgres"))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	defer conn.Close(ctx)
	var n int64
	if err := conn.QueryRow(ctx, "SELECT sessions FROM pg_stat_database WHERE datname = $1", cfg.Database).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// frontEndSetUp is the set-up of running fleetmesh front-ends.
func frontEndSetUp(fes ...*node) scaleOutSetUp {
	var s scaleOutSetUp
	for _, fe := range fes {
		s.urls = append(s.urls, fe.url)
		s.pids = append(s.pids, fe.cmd.Process.Pid)
	}
	return s
}

// khatruRelay is the build of bench/cmd/khatru-relay (the bench-only
// module, so the product module never depends on khatru).
var khatruRelay struct {
	once sync.Once
	bin  string
	err  error
}

// khatruRelayBin builds bench/cmd/khatru-relay the first time and returns
// its path; it fails t if the build failed.
func khatruRelayBin(t *testing.T) string {
	t.Helper()
	khatruRelay.once.Do(func() {
		dir, err := os.MkdirTemp("", "fleetmesh-khatru-relay-")
		if err != nil {
			khatruRelay.err = err
			return
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		bin := filepath.Join(dir, "khatru-relay")
		ctx, cancel := context.WithTimeout(context.Background(), gwBuildTimeout)
		defer cancel()
		cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/khatru-relay")
		cmd.Dir = filepath.Join(moduleRoot, "bench")
		if out, err := cmd.CombinedOutput(); err != nil {
			khatruRelay.err = fmt.Errorf("go build bench/cmd/khatru-relay: %w\n%s", err, out)
			return
		}
		khatruRelay.bin = bin
	})
	if khatruRelay.err != nil {
		t.Fatal(khatruRelay.err)
	}
	return khatruRelay.bin
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

// measureSetUp publishes n events over the set-up's relays and measures.
func measureSetUp(t *testing.T, name string, setUp scaleOutSetUp, dbPIDs func() []int, n int) scaleOutResult {
	t.Helper()
	r := scaleOutResult{Name: name, Events: n}
	urls := setUp.urls
	relayPIDs := func() []int { return setUp.pids }
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

	// REQ latency: a mix of shapes, one REQ at a time per client. Every
	// answer must hold the events the shape asks for, so that a relay
	// answering less is not counted as faster.
	shapes := []string{"ids", "author+kind", "#t", "kind"}
	want := []int{1, min(20, n/8), min(50, n), min(100, n)}
	lat := make([][]time.Duration, len(shapes))
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
				k := q % len(filters)
				s := time.Now()
				got, err := storedEvents(ws, fmt.Sprintf("q%d", q), filters[k])
				if err != nil {
					t.Error(err)
					return
				}
				d := time.Since(s)
				distinct := map[string]bool{}
				for _, e := range got {
					distinct[e.ID] = true
				}
				switch {
				case len(distinct) < len(got):
					t.Errorf("%s: REQ %s %v answered %d events, %d of them distinct", name, shapes[k], filters[k], len(got), len(distinct))
				case len(got) < want[k]:
					t.Errorf("%s: REQ %s %v answered %d events, want %d", name, shapes[k], filters[k], len(got), want[k])
				case len(got) > want[k]:
					// More than the limit before EOSE: counted and
					// logged, since it costs the relay rather than
					// flattering it.
					t.Logf("%s: REQ %s %v answered %d distinct events before EOSE, limit %d", name, shapes[k], filters[k], len(got), want[k])
					mu.Lock()
					r.ReqOverLimit++
					mu.Unlock()
				}
				mu.Lock()
				lat[k] = append(lat[k], d)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	all := slices.Concat(lat...)
	r.ReqP50ms, r.ReqP99ms = percentileMS(all, 50), percentileMS(all, 99)
	r.ReqByShape = map[string][2]float64{}
	for k, shape := range shapes {
		r.ReqByShape[shape] = [2]float64{percentileMS(lat[k], 50), percentileMS(lat[k], 99)}
	}

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
	r0, d0 := cpuSeconds(relayPIDs()), db()
	time.Sleep(10 * time.Second)
	r1, d1 := cpuSeconds(relayPIDs()), db()
	r.IdleCPUPct = (r1 - r0 + d1 - d0) / 10 * 100
	r.IdleRelayCPUPct = (r1 - r0) / 10 * 100
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
