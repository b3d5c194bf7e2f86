// Command relaybench measures a fleetmesh node's relay against khatru
// v0.17.4 (eventstore v0.16.2) in one run, on the same machine, with the
// same pre-signed events: ingest events/s from concurrent pipelined
// publishers, REQ latency to EOSE over a mix of realistic filter shapes on
// the filled store, and resident memory with idle connections and with the
// store full. It prints a table with the ratios fleetmesh/khatru and writes
// the results as JSON.
//
// It starts each relay as its own process with a fresh data directory, one
// after the other (never both at once), and only ever connects to loopback
// addresses. Every phase has a count and a time limit.
//
// It is a benchmark, not a test: it lives in the bench-only module so that
// the product module never depends on khatru. See ../../README.md.
package main

import (
	"cmp"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"
)

type options struct {
	events        int
	seed          uint64
	clients       int
	pipeline      int
	idle          int
	queries       int
	queryClients  int
	warmup        int
	candidate     string
	khatruBin     string
	khatruBackend string
	fleetmeshBin  string
	fleetmeshArgs string
	fleetmeshProf string
	build         bool
	tags          string
	khatruTags    string
	fleetmeshTags string
	mainDir       string
	cacheDir      string
	workDir       string
	keep          bool
	candFirst     bool
	out           string
	profileSecs   int
	eoseWait      time.Duration
	shapes        string
	khatruData    string
	fleetmeshHome string
	strfryBin     string
	strfryConf    string
	strfryData    string
	order         string
	noKhatru      bool
	liveSubs      int
	liveConns     int
	liveEvents    int
	liveRate      float64
	ingestTimeout time.Duration
	queryTimeout  time.Duration
	timeout       time.Duration
}

func main() {
	var o options
	flag.IntVar(&o.events, "events", 1_000_000, "number of pre-signed events to publish (the store size for REQ latency)")
	flag.Uint64Var(&o.seed, "seed", 1, "seed of the deterministic event and query generators")
	flag.IntVar(&o.clients, "clients", 16, "concurrent publishing WebSocket clients")
	flag.IntVar(&o.pipeline, "pipeline", 32, "max unacknowledged EVENTs per publishing client")
	flag.IntVar(&o.idle, "idle", 1000, "idle WebSocket connections for the memory measurement")
	flag.IntVar(&o.queries, "queries", 0, "measured REQs (after the warm-up), spread evenly over the filter shapes (0: events/250, between 200 and 4000)")
	flag.IntVar(&o.queryClients, "query-clients", 4, "concurrent REQ clients, each sending one REQ at a time")
	flag.IntVar(&o.warmup, "warmup", -1, "REQs sent first and not measured (-1: a tenth of --queries)")
	flag.StringVar(&o.candidate, "candidate", "fleetmesh", "relay compared with khatru: fleetmesh, khatru (a second khatru instance, to prove the harness), or none (khatru alone)")
	flag.StringVar(&o.khatruBin, "khatru-bin", "bin/khatru-relay", "khatru-relay binary")
	flag.StringVar(&o.khatruBackend, "khatru-backend", "badger", "eventstore backend of khatru-relay: badger or lmdb")
	flag.StringVar(&o.fleetmeshBin, "fleetmesh-bin", "bin/fleetmesh", "fleetmesh binary")
	flag.StringVar(&o.fleetmeshArgs, "fleetmesh-args", "", "extra arguments for `fleetmesh run`, space separated (e.g. a pprof flag)")
	flag.StringVar(&o.fleetmeshProf, "fleetmesh-pprof-url", "", "fleetmesh CPU profile URL (default: /debug/pprof/profile on the relay port)")
	flag.StringVar(&o.tags, "tags", "", "Go build tags for both binaries, e.g. libsecp256k1 (both go-nostr and fleetmesh then verify signatures with libsecp256k1; fleetmesh links the system library, libsecp256k1-dev)")
	flag.StringVar(&o.khatruTags, "khatru-tags", "", "build tags for khatru-relay only (default: --tags)")
	flag.StringVar(&o.fleetmeshTags, "fleetmesh-tags", "", "build tags for fleetmesh only (default: --tags)")
	flag.BoolVar(&o.build, "build", true, "build both binaries first (khatru-relay here, fleetmesh from --main-dir)")
	flag.StringVar(&o.mainDir, "main-dir", "..", "fleetmesh main module directory")
	flag.StringVar(&o.cacheDir, "cache-dir", ".cache", "where signed events are cached between runs")
	flag.StringVar(&o.workDir, "work-dir", "", "where relay data dirs and logs go (default: a new temp dir)")
	flag.BoolVar(&o.keep, "keep", false, "keep the work dir (data and relay logs) after the run")
	flag.BoolVar(&o.candFirst, "candidate-first", false, "bench the candidate before khatru (the relay run second meets a machine already warm and its page cache already full of the first one's data; alternate between runs)")
	flag.StringVar(&o.out, "out", "", "JSON results file (default results/relaybench-TIMESTAMP.json)")
	flag.IntVar(&o.profileSecs, "profile-seconds", 0, "if > 0, take a CPU profile of this many seconds from each relay during ingest and during REQs")
	flag.StringVar(&o.khatruData, "khatru-data", "", "REQ phase only: start khatru on this data dir filled by an earlier run (needs --fleetmesh-home too, or --candidate khatru)")
	flag.StringVar(&o.fleetmeshHome, "fleetmesh-home", "", "REQ phase only: start fleetmesh on this node home filled by an earlier run")
	flag.StringVar(&o.strfryBin, "strfry-bin", "", "strfry binary: if set, strfry is benched as a third relay (a build for measuring only; see docs/benchmarks/relay.md)")
	flag.StringVar(&o.strfryConf, "strfry-conf", "", "strfry config template (default: strfry.conf next to --strfry-bin); its db and relay.port are set per run")
	flag.StringVar(&o.strfryData, "strfry-data", "", "REQ phase only: start strfry on this database dir filled by an earlier run")
	flag.StringVar(&o.order, "order", "", "comma-separated relay names in the order they are benched, e.g. strfry,fleetmesh,khatru (default: khatru, candidate, strfry; --candidate-first puts the candidate first)")
	flag.BoolVar(&o.noKhatru, "no-khatru", false, "leave khatru out (e.g. fleetmesh against strfry only, or fleetmesh alone while profiling)")
	flag.IntVar(&o.liveSubs, "live-subs", 1000, "live phase: open subscriptions of mixed filters (0: no live phase)")
	flag.IntVar(&o.liveConns, "live-conns", 50, "live phase: connections the subscriptions are spread over")
	flag.IntVar(&o.liveEvents, "live-events", 3000, "live phase: new events published, one at a time, at --live-rate")
	flag.Float64Var(&o.liveRate, "live-rate", 200, "live phase: events per second published")
	flag.StringVar(&o.shapes, "shapes", "", "comma-separated filter shapes to keep in the REQ mix (default: all of "+strings.Join(shapes, ",")+")")
	flag.DurationVar(&o.eoseWait, "eose-wait", 30*time.Second, "time limit of one REQ (until its EOSE); a REQ that takes longer counts as failed")
	flag.DurationVar(&o.ingestTimeout, "ingest-timeout", 45*time.Minute, "time limit of the ingest phase, per relay")
	flag.DurationVar(&o.queryTimeout, "query-timeout", 10*time.Minute, "time limit of the REQ phase, per relay")
	flag.DurationVar(&o.timeout, "timeout", 3*time.Hour, "time limit of the whole run")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "relaybench:", err)
		os.Exit(1)
	}
}

// relayResult is everything measured for one relay.
type relayResult struct {
	Spec          relaySpec         `json:"relay"`
	URL           string            `json:"url"`
	MemStart      memStatus         `json:"memStart"`
	IdleConns     int               `json:"idleConns"`
	IdleOpenSecs  float64           `json:"idleOpenSeconds"`
	MemIdle       memStatus         `json:"memIdleConns"`
	Ingest        ingestResult      `json:"ingest"`
	MemStored     memStatus         `json:"memStored"`
	DiskBytes     int64             `json:"diskBytes"`
	Query         queryResult       `json:"query"`
	Live          *liveResult       `json:"live,omitempty"`
	MemEnd        memStatus         `json:"memEnd"`
	LoadAvg       map[string]string `json:"loadAvg"` // /proc/loadavg at each phase start: the machine is shared
	Profiles      []string          `json:"profiles,omitempty"`
	ProfileErrors []string          `json:"profileErrors,omitempty"`
	Error         string            `json:"error,omitempty"`
}

// report is the JSON results file.
type report struct {
	Started    time.Time          `json:"started"`
	Host       hostInfo           `json:"host"`
	Params     map[string]any     `json:"params"`
	Relays     []relayResult      `json:"relays"`
	Ratios     map[string]float64 `json:"ratios"` // candidate / khatru
	Mismatches map[string]int     `json:"resultCountMismatchesByShape"`
	// RatiosStrfry and MismatchesStrfry compare the candidate with strfry
	// when strfry ran too.
	RatiosStrfry     map[string]float64 `json:"ratiosStrfry,omitempty"`
	MismatchesStrfry map[string]int     `json:"resultCountMismatchesByShapeStrfry,omitempty"`
}

type hostInfo struct {
	CPUs      int    `json:"cpus"`
	GoVersion string `json:"goVersion"`
	Kernel    string `json:"kernel"`
	Note      string `json:"note"`
}

func run(ctx context.Context, o options) error {
	if o.queries == 0 {
		o.queries = min(max(o.events/250, 200), 4000)
	}
	if o.warmup < 0 {
		o.warmup = o.queries / 10
	}
	if o.clients < 1 || o.pipeline < 1 || o.queryClients < 1 || o.idle < 0 || o.queries < 1 {
		return fmt.Errorf("--clients, --pipeline, --query-clients and --queries must be >= 1, --idle >= 0")
	}
	logf := func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "%s %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
	}
	started := time.Now().UTC()

	khatru := relaySpec{Name: "khatru", Kind: "khatru", Role: "khatru", Bin: o.khatruBin, ExtraArgs: []string{"--backend", o.khatruBackend}, Existing: o.khatruData}
	if o.profileSecs > 0 {
		khatru.ExtraArgs = append(khatru.ExtraArgs, "--pprof")
	}
	var cand relaySpec
	switch o.candidate {
	case "fleetmesh":
		cand = relaySpec{Name: "fleetmesh", Kind: "fleetmesh", Role: "candidate", Bin: o.fleetmeshBin, ExtraArgs: strings.Fields(o.fleetmeshArgs), PprofURL: o.fleetmeshProf, Existing: o.fleetmeshHome}
	case "khatru":
		cand = khatru
		cand.Name, cand.Role = "khatru-standin", "candidate"
	case "none":
	default:
		return fmt.Errorf("--candidate must be fleetmesh, khatru or none, got %q", o.candidate)
	}
	var specs []relaySpec
	if !o.noKhatru {
		specs = append(specs, khatru)
	}
	if o.candidate != "none" {
		specs = append(specs, cand)
	}
	if o.strfryBin != "" {
		conf := o.strfryConf
		if conf == "" {
			conf = filepath.Join(filepath.Dir(o.strfryBin), "strfry.conf")
		}
		specs = append(specs, relaySpec{Name: "strfry", Kind: "strfry", Role: "strfry", Bin: o.strfryBin, Conf: conf, Existing: o.strfryData})
	}
	order, err := runOrder(specs, o.order, o.candFirst)
	if err != nil {
		return err
	}

	if o.build {
		if err := buildBinaries(ctx, o, logf); err != nil {
			return err
		}
	}
	for _, s := range specs {
		if _, err := os.Stat(s.Bin); err != nil {
			return fmt.Errorf("%s binary: %w (build it, see README.md)", s.Name, err)
		}
	}

	c, err := loadOrBuildCorpus(corpusParams{events: o.events, seed: o.seed}, o.cacheDir, logf)
	if err != nil {
		return err
	}
	qs, err := keepShapes(buildQueries(c, len(shapes)*(o.warmup+o.queries), o.seed), o.shapes, o.warmup+o.queries)
	if err != nil {
		return err
	}

	workDir := o.workDir
	if workDir == "" {
		if workDir, err = os.MkdirTemp("", "relaybench-"); err != nil {
			return err
		}
	} else if err := os.MkdirAll(workDir, 0o755); err != nil {
		return fmt.Errorf("--work-dir: %w", err)
	}
	if !o.keep {
		defer os.RemoveAll(workDir)
	}
	out := o.out
	if out == "" {
		out = filepath.Join("results", "relaybench-"+started.Format("20060102T150405Z")+".json")
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	profDir := strings.TrimSuffix(out, ".json") + "-profiles"

	rep := report{
		Started: started,
		Host: hostInfo{CPUs: runtime.NumCPU(), GoVersion: runtime.Version(), Kernel: kernel(),
			Note: "shared machine: other engineers' builds and tests run at the same time, so figures are noisy"},
		Params: map[string]any{"events": o.events, "seed": o.seed, "clients": o.clients, "pipeline": o.pipeline,
			"idle": o.idle, "candidateFirst": o.candFirst, "order": orderNames(specs, order), "liveSubs": o.liveSubs, "liveEvents": o.liveEvents, "liveRate": o.liveRate, "queries": o.queries, "queryClients": o.queryClients, "warmup": o.warmup,
			"khatruBackend": o.khatruBackend, "candidate": o.candidate, "khatruBuildTags": cmp.Or(o.khatruTags, o.tags), "fleetmeshBuildTags": cmp.Or(o.fleetmeshTags, o.tags), "fleetmeshCommit": gitHead(ctx, o.mainDir), "authors": corpusParams{events: o.events}.authorCount()},
	}
	// The report keeps khatru first, the candidate second and strfry
	// third whichever ran first: ratios are candidate over khatru and
	// candidate over strfry.
	results := make([]*relayResult, len(specs))
	for _, i := range order {
		spec := specs[i]
		logf("=== %s", spec.Name)
		r := benchRelay(ctx, spec, c, qs, o, workDir, profDir, logf)
		if r.Error != "" {
			logf("%s: %s", spec.Name, r.Error)
		}
		results[i] = &r
		if ctx.Err() != nil {
			break
		}
	}
	for _, r := range results {
		if r != nil {
			rep.Relays = append(rep.Relays, *r)
		}
	}
	measured := qs[min(o.warmup, len(qs)):]
	if kh, cd := relayByRole(rep.Relays, "khatru"), relayByRole(rep.Relays, "candidate"); kh != nil && cd != nil {
		rep.Ratios = ratios(*kh, *cd)
		rep.Mismatches = mismatches(kh.Query.Counts, cd.Query.Counts, measured)
	}
	if sf, cd := relayByRole(rep.Relays, "strfry"), relayByRole(rep.Relays, "candidate"); sf != nil && cd != nil {
		rep.RatiosStrfry = ratios(*sf, *cd)
		rep.MismatchesStrfry = mismatches(sf.Query.Counts, cd.Query.Counts, measured)
	}
	printTable(os.Stdout, rep)
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(out, b, 0o644); err != nil {
		return err
	}
	fmt.Printf("\nresults: %s\n", out)
	if o.keep {
		fmt.Printf("relay data and logs kept in %s\n", workDir)
	}
	return ctx.Err()
}

// benchRelay runs all phases against one relay process.
func benchRelay(ctx context.Context, spec relaySpec, c *corpus, qs []query, o options, workDir, profDir string, logf func(string, ...any)) relayResult {
	r := relayResult{Spec: spec, LoadAvg: map[string]string{}}
	r.LoadAvg["start"] = loadAvg()
	p, err := startRelay(ctx, spec, workDir)
	if err != nil {
		r.Error = err.Error()
		return r
	}
	defer p.stop()
	r.URL = p.url
	pid := p.cmd.Process.Pid
	logf("%s listening on %s (pid %d)", spec.Name, p.url, pid)
	if r.MemStart, err = p.settledMem(ctx, 5*time.Second); err != nil {
		r.Error = err.Error()
		return r
	}

	if o.idle > 0 && spec.Existing == "" {
		t0 := time.Now()
		ic, err := openIdle(ctx, p.url, o.idle, 2*time.Minute)
		if err != nil {
			r.Error = "idle connections: " + err.Error()
			return r
		}
		r.IdleOpenSecs = time.Since(t0).Seconds()
		r.IdleConns = len(ic.conns)
		r.MemIdle, err = p.settledMem(ctx, 15*time.Second)
		ic.close()
		if err != nil {
			r.Error = err.Error()
			return r
		}
		logf("%s: %d idle connections, VmRSS %.1f MiB", spec.Name, r.IdleConns, mib(r.MemIdle.VmRSS))
	}

	profURL := spec.PprofURL
	if profURL == "" {
		profURL = strings.Replace(p.url, "ws://", "http://", 1) + "/debug/pprof/profile"
	}
	profile := func(phase string) func() {
		if o.profileSecs <= 0 || spec.Kind == "strfry" { // strfry has no profile endpoint
			return func() {}
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			path, err := fetchProfile(ctx, profURL, o.profileSecs, filepath.Join(profDir, spec.Name+"-"+phase+".pprof"))
			if err != nil {
				r.ProfileErrors = append(r.ProfileErrors, fmt.Sprintf("%s: %v", phase, err))
				return
			}
			r.Profiles = append(r.Profiles, path)
		}()
		return func() { <-done }
	}

	if spec.Existing == "" {
		logf("%s: publishing %d events from %d clients, pipeline %d", spec.Name, len(c.frames), o.clients, o.pipeline)
		r.LoadAvg["ingest"] = loadAvg()
		waitProf := profile("ingest")
		cpu0, cpuErr := processCPU(p.cmd.Process.Pid)
		r.Ingest = ingest(ctx, p.url, c, ingestConfig{clients: o.clients, pipeline: o.pipeline, timeout: o.ingestTimeout, ackWait: 60 * time.Second})
		if cpu1, err := processCPU(p.cmd.Process.Pid); err == nil && cpuErr == nil && r.Ingest.OKTrue > 0 {
			r.Ingest.CPUMicrosPerEvent = float64((cpu1 - cpu0).Microseconds()) / float64(r.Ingest.OKTrue)
		}
		waitProf()
		logf("%s: %d OK true, %d OK false in %.1fs: %.0f events/s %s", spec.Name, r.Ingest.OKTrue, r.Ingest.OKFalse, r.Ingest.Seconds, r.Ingest.EventsPerSec, r.Ingest.Error)
		if err := p.alive(); err != nil {
			r.Error = err.Error()
			return r
		}
	} else {
		logf("%s: REQ phase only, on the existing store %s", spec.Name, spec.Existing)
	}
	if r.MemStored, err = p.settledMem(ctx, 20*time.Second); err != nil {
		r.Error = err.Error()
		return r
	}
	r.DiskBytes = diskUsage(p.dataDir)

	logf("%s: %d REQs (+%d warm-up) from %d clients", spec.Name, len(qs)-min(o.warmup, len(qs)), o.warmup, o.queryClients)
	r.LoadAvg["req"] = loadAvg()
	waitProf := profile("req")
	r.Query = runQueries(ctx, p.url, qs, queryConfig{clients: o.queryClients, warmup: o.warmup, timeout: o.queryTimeout, eoseWait: o.eoseWait})
	waitProf()
	logf("%s: REQ p50 %.2f ms p99 %.2f ms, %d failures", spec.Name, r.Query.All.P50ms, r.Query.All.P99ms, r.Query.Failures)
	if o.liveSubs > 0 && o.liveEvents > 0 {
		logf("%s: live: %d subscriptions on %d connections, %d events at %.0f/s", spec.Name, o.liveSubs, o.liveConns, o.liveEvents, o.liveRate)
		r.LoadAvg["live"] = loadAvg()
		lr := runLive(ctx, p.url, c, liveConfig{subs: o.liveSubs, conns: o.liveConns, events: o.liveEvents, rate: o.liveRate, seed: o.seed, timeout: 10 * time.Minute})
		r.Live = &lr
		logf("%s: live: %d/%d delivered, after OK p50 %.2f ms p99 %.2f ms", spec.Name, lr.Delivered, lr.Expected, lr.AfterOKP50ms, lr.AfterOKP99ms)
	}
	r.LoadAvg["end"] = loadAvg()
	if r.MemEnd, err = readMemStatus(pid); err != nil {
		r.Error = err.Error()
	}
	if err := p.alive(); err != nil {
		r.Error = err.Error()
	}
	return r
}

// buildBinaries builds khatru-relay in this module and, when it is the
// candidate, fleetmesh from the main module.
func buildBinaries(ctx context.Context, o options, logf func(string, ...any)) error {
	bctx, cancel := context.WithTimeout(ctx, 15*time.Minute)
	defer cancel()
	kb, err := filepath.Abs(o.khatruBin)
	if err != nil {
		return err
	}
	logf("building %s", kb)
	cmd := exec.CommandContext(bctx, "go", "build", "-tags", cmp.Or(o.khatruTags, o.tags), "-o", kb, "./cmd/khatru-relay")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("build khatru-relay: %w", err)
	}
	if o.candidate != "fleetmesh" {
		return nil
	}
	fb, err := filepath.Abs(o.fleetmeshBin)
	if err != nil {
		return err
	}
	logf("building %s from %s", fb, o.mainDir)
	cmd = exec.CommandContext(bctx, "go", "build", "-tags", cmp.Or(o.fleetmeshTags, o.tags), "-o", fb, "./cmd/fleetmesh")
	cmd.Dir = o.mainDir
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("build fleetmesh in %s: %w", o.mainDir, err)
	}
	return nil
}

// fetchProfile downloads a CPU profile of secs seconds to path.
func fetchProfile(ctx context.Context, rawURL string, secs int, path string) (string, error) {
	if err := checkLoopback(rawURL); err != nil {
		return "", err
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return "", err
	}
	q := u.Query()
	q.Set("seconds", fmt.Sprint(secs))
	u.RawQuery = q.Encode()
	ctx, cancel := context.WithTimeout(ctx, time.Duration(secs)*time.Second+30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 200))
		return "", fmt.Errorf("GET %s: %s: %q (the node exposes no pprof endpoint here)", u, resp.Status, b)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return "", err
	}
	f, err := os.Create(path)
	if err != nil {
		return "", err
	}
	if _, err := io.Copy(f, io.LimitReader(resp.Body, 256<<20)); err != nil {
		f.Close()
		return "", err
	}
	return path, f.Close()
}

func kernel() string {
	b, err := os.ReadFile("/proc/sys/kernel/osrelease")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// runOrder returns the indexes of specs in the order they are benched:
// the names listed in list (every relay exactly once), else the specs'
// order, with the candidate moved to the front if candFirst.
func runOrder(specs []relaySpec, list string, candFirst bool) ([]int, error) {
	var order []int
	if list == "" {
		for i, s := range specs {
			if candFirst && s.Role == "candidate" {
				order = append([]int{i}, order...)
			} else {
				order = append(order, i)
			}
		}
		return order, nil
	}
	for _, name := range strings.Split(list, ",") {
		i := slices.IndexFunc(specs, func(s relaySpec) bool { return s.Name == strings.TrimSpace(name) })
		if i < 0 || slices.Contains(order, i) {
			return nil, fmt.Errorf("--order: %q is not one of the relays of this run (%s) or is listed twice", name, strings.Join(orderNames(specs, nil), ","))
		}
		order = append(order, i)
	}
	if len(order) != len(specs) {
		return nil, fmt.Errorf("--order must list every relay of this run: %s", strings.Join(orderNames(specs, nil), ","))
	}
	return order, nil
}

// orderNames lists the names of specs in the given order (nil: as they are).
func orderNames(specs []relaySpec, order []int) []string {
	var names []string
	if order == nil {
		for _, s := range specs {
			names = append(names, s.Name)
		}
		return names
	}
	for _, i := range order {
		names = append(names, specs[i].Name)
	}
	return names
}

// relayByRole finds the result of the relay with the given role, or nil.
func relayByRole(rs []relayResult, role string) *relayResult {
	for i := range rs {
		if rs[i].Spec.Role == role {
			return &rs[i]
		}
	}
	return nil
}

// keepShapes returns the first n queries whose shape is in the
// comma-separated list (all shapes if the list is empty). Filtering a longer
// list keeps each query identical to the one a full-mix run sends.
func keepShapes(qs []query, list string, n int) ([]query, error) {
	if list == "" {
		return qs[:min(n, len(qs))], nil
	}
	keep := map[string]bool{}
	for _, sh := range strings.Split(list, ",") {
		if !slices.Contains(shapes, sh) {
			return nil, fmt.Errorf("--shapes: unknown shape %q (known: %s)", sh, strings.Join(shapes, ","))
		}
		keep[sh] = true
	}
	var out []query
	for _, q := range qs {
		if keep[q.shape] && len(out) < n {
			out = append(out, q)
		}
	}
	return out, nil
}

// gitHead names the main module's commit the fleetmesh binary was built
// from, with "+dirty" when the work tree had uncommitted changes (the tree
// is shared, so it often has).
func gitHead(ctx context.Context, dir string) string {
	head, err := exec.CommandContext(ctx, "git", "-C", dir, "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return ""
	}
	h := strings.TrimSpace(string(head))
	if st, err := exec.CommandContext(ctx, "git", "-C", dir, "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(st) > 0 {
		h += "+dirty"
	}
	return h
}

// loadAvg is the 1/5/15-minute load average, recorded so that a reader can
// tell a quiet run from one that shared the CPUs with other work.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	return strings.Join(f[:min(3, len(f))], " ")
}

func mib(kib int64) float64 { return float64(kib) / 1024 }
