package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// relaySpec says how to start one relay under test.
type relaySpec struct {
	Name string `json:"name"` // label in the report, e.g. "khatru" or "fleetmesh"
	Kind string `json:"kind"` // "khatru", "fleetmesh" or "strfry": how to start it
	Bin  string `json:"bin"`  // path of the binary
	// Role is the relay's part in the comparison: "khatru" (the reference
	// the ratios divide by), "candidate" (the relay measured against it) or
	// "strfry" (the second reference).
	Role string `json:"role"`
	// Conf is strfry's config template (strfry.conf): its db and
	// relay.port lines are rewritten for each run.
	Conf      string   `json:"conf,omitempty"`
	ExtraArgs []string `json:"extraArgs"` // appended to the run command line
	PprofURL  string   `json:"-"`         // CPU profile endpoint; empty: derive from the relay URL
	// Existing, if set, is a data dir (khatru) or node home (fleetmesh)
	// filled by an earlier run: the relay starts on it as it is, and only
	// the REQ phase is measured.
	Existing string `json:"existing,omitempty"`
}

// relayProc is one running relay process; stop must be called.
type relayProc struct {
	spec    relaySpec
	cmd     *exec.Cmd
	url     string // ws://127.0.0.1:PORT
	dataDir string
	logPath string
	exited  chan struct{}
	waitErr error
}

// startTimeout bounds how long a relay may take to print its URL.
const startTimeout = 60 * time.Second

var relayLine = regexp.MustCompile(`relay (ws://\S+)`)

// startRelay starts spec as its own process with a fresh data directory
// under workDir, and waits for its "relay ws://..." line.
func startRelay(ctx context.Context, spec relaySpec, workDir string) (*relayProc, error) {
	dataDir := filepath.Join(workDir, spec.Name+"-data")
	if spec.Existing != "" {
		dataDir = spec.Existing
		if _, err := os.Stat(dataDir); err != nil {
			return nil, fmt.Errorf("%s: existing data: %w", spec.Name, err)
		}
	} else if err := os.RemoveAll(dataDir); err != nil {
		return nil, fmt.Errorf("%s: clear data dir: %w", spec.Name, err)
	}
	var args []string
	var strfryURL string // strfry prints no URL: it listens where its config says
	switch spec.Kind {
	case "khatru":
		args = append([]string{"--listen", "127.0.0.1:0", "--data", dataDir}, spec.ExtraArgs...)
	case "fleetmesh":
		if spec.Existing == "" {
			if err := initFleetmesh(ctx, spec, dataDir); err != nil {
				return nil, err
			}
		}
		args = append([]string{"run", "--home", dataDir, "--listen", "127.0.0.1:0"}, spec.ExtraArgs...)
	case "strfry":
		conf, port, err := writeStrfryConf(spec, dataDir, workDir)
		if err != nil {
			return nil, err
		}
		strfryURL = fmt.Sprintf("ws://127.0.0.1:%d", port)
		args = append([]string{"--config=" + conf, "relay"}, spec.ExtraArgs...)
	default:
		return nil, fmt.Errorf("%s: unknown relay kind %q", spec.Name, spec.Kind)
	}
	logPath := filepath.Join(workDir, spec.Name+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("%s: log file: %w", spec.Name, err)
	}
	cmd := exec.Command(spec.Bin, args...)
	cmd.Stderr = logFile
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		logFile.Close()
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("%s: start %s: %w", spec.Name, spec.Bin, err)
	}
	p := &relayProc{spec: spec, cmd: cmd, dataDir: dataDir, logPath: logPath, exited: make(chan struct{})}

	urlCh := make(chan string, 1)
	if strfryURL != "" {
		go func() {
			if waitListening(strfryURL, startTimeout, p.exited) {
				urlCh <- strfryURL
			}
		}()
	}
	// This goroutine owns stdout until the process exits: it reports the
	// relay line once and copies everything to the log file.
	go func() {
		sc := bufio.NewScanner(stdout)
		sent := false
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintln(logFile, line)
			if m := relayLine.FindStringSubmatch(line); m != nil && !sent {
				urlCh <- m[1]
				sent = true
			}
		}
		io.Copy(io.Discard, stdout)
	}()
	go func() {
		p.waitErr = cmd.Wait()
		logFile.Close()
		close(p.exited)
	}()

	select {
	case u := <-urlCh:
		if err := checkLoopback(u); err != nil {
			p.stop()
			return nil, fmt.Errorf("%s: %w", spec.Name, err)
		}
		p.url = u
		return p, nil
	case <-p.exited:
		return nil, fmt.Errorf("%s: exited before listening (%v); see %s", spec.Name, p.waitErr, logPath)
	case <-time.After(startTimeout):
		p.stop()
		return nil, fmt.Errorf("%s: no 'relay ws://' line within %s; see %s", spec.Name, startTimeout, logPath)
	case <-ctx.Done():
		p.stop()
		return nil, ctx.Err()
	}
}

// initFleetmesh creates a node home with `fleetmesh init` and lifts the
// relay's per-connection and per-address limits (benchLimits) so they do
// not throttle the load generator.
func initFleetmesh(ctx context.Context, spec relaySpec, home string) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, spec.Bin, "init", "--home", home).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: init --home %s: %w: %s", spec.Name, home, err, out)
	}
	path := filepath.Join(home, "config.toml")
	old, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("%s: read %s: %w", spec.Name, path, err)
	}
	// mDNS (on by default while a node is home class) would multicast on
	// the machine's network during the run.
	cfg := mdnsKey.ReplaceAllString(withBenchLimits(string(old)), "mdns = 'off'")
	return os.WriteFile(path, []byte(cfg), 0o600)
}

// mdnsKey is the [mesh] mdns line `init` writes.
var mdnsKey = regexp.MustCompile(`(?m)^mdns = .*$`)

// benchLimits are the [relay] settings a benchmark run changes. Every
// client of the bench (16 publishers, 4 query clients, 1,000 idle
// connections, 50 live connections with 1,000 subscriptions) comes from
// 127.0.0.1, so the defaults that bound one address against abuse
// (spec/limits.md) would measure those bounds instead of the relay:
// the per-address query budget alone (200 ms of query time a second)
// caps four sequential REQ clients at about 180 REQs a second. khatru
// runs with no rate limits and strfry with its shipped config, which
// has no per-address bounds either. Idle connections are what the
// memory phase measures, so they are not closed for sending nothing.
// A query budget of 0 takes the default, so a budget is lifted by
// making it larger than any run can spend.
var benchLimits = []struct{ key, value string }{
	{"events_per_second", "0"},
	{"ip_events_per_second", "0"},
	{"req_ms_per_second", "1000000000"},
	{"req_rows_per_second", "1000000000"},
	{"ip_req_ms_per_second", "1000000000"},
	{"ip_req_rows_per_second", "1000000000"},
	{"max_connections_per_ip", "100000"},
	{"ip_connections_per_second", "100000"},
	{"ip_max_subscriptions", "100000"},
	{"first_message_timeout", "'24h'"},
}

// withBenchLimits returns the TOML config text with benchLimits set in
// its [relay] table, keeping every other setting `init` wrote.
func withBenchLimits(cfg string) string {
	var set []string
	for _, kv := range benchLimits {
		set = append(set, kv.key+" = "+kv.value)
	}
	limits := strings.Join(set, "\n")
	var out []string
	inRelay, done := false, false
	for _, line := range strings.Split(cfg, "\n") {
		t := strings.TrimSpace(line)
		if strings.HasPrefix(t, "[") {
			inRelay = t == "[relay]"
			out = append(out, line)
			if inRelay {
				out = append(out, limits)
				done = true
			}
			continue
		}
		if inRelay {
			key, _, _ := strings.Cut(t, "=")
			if slices.ContainsFunc(benchLimits, func(kv struct{ key, value string }) bool { return kv.key == strings.TrimSpace(key) }) {
				continue
			}
		}
		out = append(out, line)
	}
	s := strings.TrimRight(strings.Join(out, "\n"), "\n") + "\n"
	if !done {
		s += "\n[relay]\n" + limits + "\n"
	}
	return strings.TrimLeft(s, "\n")
}

// writeStrfryConf writes strfry's config for one run into workDir: the
// template spec.Conf with its database in dataDir (created here) and the
// relay on a free loopback port. Everything else stays as the template
// has it (strfry's defaults), so the relay is measured as operators run it.
func writeStrfryConf(spec relaySpec, dataDir, workDir string) (path string, port int, err error) {
	tmpl, err := os.ReadFile(spec.Conf)
	if err != nil {
		return "", 0, fmt.Errorf("%s: config template: %w (--strfry-conf)", spec.Name, err)
	}
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		return "", 0, fmt.Errorf("%s: data dir: %w", spec.Name, err)
	}
	if port, err = freePort(); err != nil {
		return "", 0, fmt.Errorf("%s: %w", spec.Name, err)
	}
	conf, err := strfryConf(string(tmpl), dataDir, port)
	if err != nil {
		return "", 0, fmt.Errorf("%s: %s: %w", spec.Name, spec.Conf, err)
	}
	path = filepath.Join(workDir, spec.Name+".conf")
	return path, port, os.WriteFile(path, []byte(conf), 0o644)
}

var (
	strfryDBLine   = regexp.MustCompile(`(?m)^db\s*=.*$`)
	strfryPortLine = regexp.MustCompile(`(?m)^(\s*)port\s*=\s*\d+\s*(#.*)?$`)
	strfryBindLine = regexp.MustCompile(`(?m)^(\s*)bind\s*=.*$`)
)

// strfryConf rewrites a strfry.conf text: db in dataDir, relay.port, and
// the bind address pinned to loopback. It fails if a line it must rewrite
// is missing, rather than run a relay on the template's database.
func strfryConf(tmpl, dataDir string, port int) (string, error) {
	for _, re := range []*regexp.Regexp{strfryDBLine, strfryPortLine, strfryBindLine} {
		if n := len(re.FindAllStringIndex(tmpl, -1)); n != 1 {
			return "", fmt.Errorf("want exactly one line matching %s, found %d", re, n)
		}
	}
	tmpl = strfryDBLine.ReplaceAllLiteralString(tmpl, fmt.Sprintf("db = %q", strings.TrimSuffix(dataDir, "/")+"/"))
	tmpl = strfryPortLine.ReplaceAllString(tmpl, fmt.Sprintf("${1}port = %d", port))
	tmpl = strfryBindLine.ReplaceAllString(tmpl, `${1}bind = "127.0.0.1"`)
	return tmpl, nil
}

// freePort asks the kernel for a free loopback TCP port.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// waitListening polls until a TCP connection to the URL's host succeeds
// (true), the process exits or the timeout passes (false).
func waitListening(rawURL string, timeout time.Duration, exited <-chan struct{}) bool {
	u, err := url.Parse(rawURL)
	if err != nil {
		return false
	}
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if c, err := net.DialTimeout("tcp", u.Host, time.Second); err == nil {
			c.Close()
			return true
		}
		select {
		case <-exited:
			return false
		case <-time.After(100 * time.Millisecond):
		}
	}
	return false
}

// checkLoopback refuses any relay URL that is not on a loopback address:
// the bench only ever sends traffic to this machine.
func checkLoopback(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("relay URL %q: %w", raw, err)
	}
	ip := net.ParseIP(u.Hostname())
	if ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("relay URL %q is not a loopback address; refusing to send traffic", raw)
	}
	return nil
}

// stop sends SIGTERM, waits up to 30 s, then kills.
func (p *relayProc) stop() {
	select {
	case <-p.exited:
		return
	default:
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(30 * time.Second):
		p.cmd.Process.Kill()
		<-p.exited
	}
}

// alive reports an error if the process has exited.
func (p *relayProc) alive() error {
	select {
	case <-p.exited:
		return fmt.Errorf("%s exited: %v; see %s", p.spec.Name, p.waitErr, p.logPath)
	default:
		return nil
	}
}

// memStatus is the memory picture of a process from /proc/PID/status, in KiB.
type memStatus struct {
	VmRSS   int64 `json:"vmRSSKiB"`
	VmHWM   int64 `json:"vmHWMKiB"`
	RssAnon int64 `json:"rssAnonKiB"`
	RssFile int64 `json:"rssFileKiB"`
}

func readMemStatus(pid int) (memStatus, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return memStatus{}, err
	}
	var m memStatus
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		f := strings.Fields(v)
		if len(f) == 0 {
			continue
		}
		n, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			continue
		}
		switch k {
		case "VmRSS":
			m.VmRSS = n
		case "VmHWM":
			m.VmHWM = n
		case "RssAnon":
			m.RssAnon = n
		case "RssFile":
			m.RssFile = n
		}
	}
	if m.VmRSS == 0 {
		return m, fmt.Errorf("/proc/%d/status: no VmRSS", pid)
	}
	return m, nil
}

// settledMem polls the process's memory every 250 ms until VmRSS changes by
// less than 1% over a second (or maxWait passes), then returns it. Memory
// right after a burst of work is still moving; this waits for it to settle
// instead of sleeping a fixed time.
func (p *relayProc) settledMem(ctx context.Context, maxWait time.Duration) (memStatus, error) {
	deadline := time.Now().Add(maxWait)
	var hist []int64
	for {
		m, err := readMemStatus(p.cmd.Process.Pid)
		if err != nil {
			return m, err
		}
		hist = append(hist, m.VmRSS)
		if n := len(hist); n >= 5 {
			lo, hi := hist[n-5], hist[n-5]
			for _, v := range hist[n-5:] {
				lo, hi = min(lo, v), max(hi, v)
			}
			if float64(hi-lo) <= 0.01*float64(hi) {
				return m, nil
			}
		}
		if time.Now().After(deadline) {
			return m, nil
		}
		select {
		case <-ctx.Done():
			return m, ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// diskUsage sums the blocks allocated to the files under dir, so a sparse
// LMDB map file counts only what it really uses.
func diskUsage(dir string) int64 {
	var total int64
	filepath.Walk(dir, func(_ string, info os.FileInfo, err error) error {
		if err == nil && info.Mode().IsRegular() {
			if st, ok := info.Sys().(*syscall.Stat_t); ok {
				total += st.Blocks * 512
			} else {
				total += info.Size()
			}
		}
		return nil
	})
	return total
}

// processCPU is the user+system CPU time a process has used so far, from
// /proc/PID/stat (fields 14 and 15, in USER_HZ ticks, which the kernel's
// /proc ABI fixes at 100 per second).
func processCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) may hold spaces; fields after it are
	// counted from its closing parenthesis.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	var ticks int64
	for _, s := range f[11:13] { // utime, stime: fields 14 and 15 overall
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * (time.Second / 100), nil
}
