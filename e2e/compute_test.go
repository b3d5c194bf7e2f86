package e2e

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"fleetmesh.org/fleetmesh/compute"
)

// moduleCID is the CID a job names a module by.
func moduleCID(module []byte) string { return compute.ModuleCID(module).String() }

// computeConfig is a mesh node with 2-second accounting windows that
// executes jobs for others.
const computeConfig = accountingConfig + "\n[compute]\noffer = true\n"

// jobJSON is what `fleetmesh job run --json` prints.
type jobJSON struct {
	JobID      string   `json:"job_id"`
	Outcome    string   `json:"outcome"`
	Reason     string   `json:"reason"`
	Output     []byte   `json:"output"`
	ResultHash string   `json:"result_hash"`
	Executors  []string `json:"executors"`
	Audited    bool     `json:"audited"`
	Runs       []struct {
		Executor string `json:"executor"`
		Outcome  string `json:"outcome"`
		Fuel     uint64 `json:"fuel"`
		Error    string `json:"error"`
		Caught   string `json:"caught"`
	} `json:"runs"`
}

// wasmFile builds compute/testdata/NAME.wat with wat2wasm into the
// test's directory and returns the module's path.
func wasmFile(t *testing.T, name string) string {
	t.Helper()
	if _, err := exec.LookPath("wat2wasm"); err != nil {
		t.Fatal("wat2wasm is not installed: the compute tests build their modules with Debian's wabt (apt-get install wabt)")
	}
	out := filepath.Join(t.TempDir(), name+".wasm")
	if b, err := exec.Command("wat2wasm", filepath.Join(moduleRoot, "compute", "testdata", name+".wat"), "-o", out).CombinedOutput(); err != nil {
		t.Fatalf("wat2wasm: %v\n%s", err, b)
	}
	return out
}

// runJob runs `fleetmesh job run --json` at home until it is planned
// (the executors' descriptors reach the requester a little after it
// connects), within a bounded wait.
func runJob(t *testing.T, home, module, input string, redundancy int) jobJSON {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		out, errOut, err := cli(t, "job", "run", "--home", home, "--module", module, "--input", input,
			"--redundancy", fmt.Sprint(redundancy), "--json")
		if err == nil {
			var j jobJSON
			if err := json.Unmarshal([]byte(out), &j); err != nil {
				t.Fatalf("job run --json printed %q: %v", out, err)
			}
			return j
		}
		if time.Now().After(deadline) {
			t.Fatalf("fleetmesh job run: %v\n%s", err, errOut)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// computeReceipt is the compute part of `fleetmesh receipts --json`.
type computeReceipt struct {
	A       string `json:"a"`
	CountsA struct {
		Gave, Received struct {
			ComputeUnits uint64 `json:"compute_units"`
		}
	} `json:"counts_a"`
	CountsB struct {
		Gave, Received struct {
			ComputeUnits uint64 `json:"compute_units"`
		}
	} `json:"counts_b"`
}

// computeUnits sums what home's co-signed receipts with did say did gave
// home and home received from did, in compute units.
func computeUnits(t *testing.T, home, did string) (gave, received uint64) {
	t.Helper()
	out, errOut, err := cli(t, "receipts", "--home", home, "--node", did, "--json")
	if err != nil {
		t.Fatalf("fleetmesh receipts: %v\n%s", err, errOut)
	}
	var rs []computeReceipt
	if err := json.Unmarshal([]byte(out), &rs); err != nil {
		t.Fatalf("receipts --json: %v", err)
	}
	for _, r := range rs {
		if r.A == did {
			gave += r.CountsA.Gave.ComputeUnits
			received += r.CountsB.Received.ComputeUnits
		} else {
			gave += r.CountsB.Gave.ComputeUnits
			received += r.CountsA.Received.ComputeUnits
		}
	}
	return gave, received
}

// TestComputeJobOnThreeExecutors: a four-node mesh of real processes,
// three offering compute; `fleetmesh job run --redundancy 3` at the
// fourth runs a module on the three, their results agree, the output is
// the module's, and the co-signed receipts between the requester and
// each executor record the compute units on both sides.
func TestComputeJobOnThreeExecutors(t *testing.T) {
	needBinary(t)
	module := wasmFile(t, "upper")
	var execs []*meshNode
	var addrs []string
	for range 3 {
		h := newHome(t, computeConfig)
		n := startMeshNode(t, h, addrs...)
		n.did = runID(t, h).DID
		execs = append(execs, n)
		addrs = append(addrs, n.mesh)
	}
	rh := newHome(t, accountingConfig)
	startMeshNode(t, rh, addrs...)
	input := filepath.Join(t.TempDir(), "input")
	if err := os.WriteFile(input, []byte("three executors agree"), 0o644); err != nil {
		t.Fatal(err)
	}
	j := runJob(t, rh, module, input, 3)
	want := "THREE EXECUTORS AGREE"
	if j.Outcome != "ok" || string(j.Output) != want {
		t.Fatalf("job: %+v, want outcome ok and output %q", j, want)
	}
	if sum := sha256.Sum256([]byte(want)); j.ResultHash != hex.EncodeToString(sum[:]) {
		t.Fatalf("result_hash %s is not the output's sha256", j.ResultHash)
	}
	ran := map[string]bool{}
	for _, r := range j.Runs {
		if r.Outcome == "ok" && r.Error == "" && r.Caught == "" {
			ran[r.Executor] = true
		}
	}
	for _, e := range execs {
		if !ran[e.did] {
			t.Fatalf("executor %s did not return an agreeing result: %+v", e.did, j.Runs)
		}
	}
	// Receipts: every executor gave compute units, the requester
	// received the same, once the window closed and both signed.
	deadline := time.Now().Add(45 * time.Second)
	for _, e := range execs {
		for {
			gave, received := computeUnits(t, rh, e.did)
			if gave > 0 && gave == received {
				break
			}
			if time.Now().After(deadline) {
				out, _, _ := cli(t, "receipts", "--home", rh, "--node", e.did, "--json")
				t.Fatalf("receipts with %s record %d compute units given and %d received:\n%s", e.did, gave, received, out)
			}
			time.Sleep(500 * time.Millisecond)
		}
	}
}

// tap is a TCP relay on loopback that keeps every byte it carries both
// ways: the node in the middle of a job's path.
type tap struct {
	ln   net.Listener
	mu   sync.Mutex
	seen bytes.Buffer
	wg   sync.WaitGroup
}

func newTap(t *testing.T, to string) *tap {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tp := &tap{ln: ln}
	t.Cleanup(func() { ln.Close(); tp.wg.Wait() })
	tp.wg.Add(1)
	go func() {
		defer tp.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			d, err := net.Dial("tcp", to)
			if err != nil {
				c.Close()
				continue
			}
			for _, p := range [][2]net.Conn{{c, d}, {d, c}} {
				tp.wg.Add(1)
				go func() {
					defer tp.wg.Done()
					defer p[1].Close()
					io.Copy(p[1], io.TeeReader(p[0], tp))
				}()
			}
			t.Cleanup(func() { c.Close(); d.Close() })
		}
	}()
	return tp
}

func (tp *tap) Write(b []byte) (int, error) {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	return tp.seen.Write(b)
}

func (tp *tap) bytes() []byte {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	return bytes.Clone(tp.seen.Bytes())
}

// TestComputeRelayCannotRead: the requester reaches its one executor
// only through a relay that keeps every byte it carries; the job runs,
// and neither its input nor its output is among those bytes.
func TestComputeRelayCannotRead(t *testing.T) {
	needBinary(t)
	module := wasmFile(t, "upper")
	eh := newHome(t, computeConfig)
	e := startMeshNode(t, eh)
	e.did = runID(t, eh).DID
	// The executor's mesh address, through the tap.
	i := strings.Index(e.mesh, "/tcp/")
	rest := e.mesh[i+len("/tcp/"):]
	port, tail, _ := strings.Cut(rest, "/")
	tp := newTap(t, "127.0.0.1:"+port)
	via := e.mesh[:i] + "/tcp/" + strings.TrimPrefix(tp.ln.Addr().String(), "127.0.0.1:") + "/" + tail
	rh := newHome(t, accountingConfig)
	startMeshNode(t, rh, via)
	secret := "the relay must not read this input"
	input := filepath.Join(t.TempDir(), "input")
	if err := os.WriteFile(input, []byte(secret), 0o644); err != nil {
		t.Fatal(err)
	}
	before := len(tp.bytes())
	j := runJob(t, rh, module, input, 1)
	if j.Outcome != "ok" || string(j.Output) != strings.ToUpper(secret) || len(j.Executors) != 1 || j.Executors[0] != e.did {
		t.Fatalf("job: %+v", j)
	}
	seen := tp.bytes()
	// The job went through the tap: its input message alone carries the
	// module, sealed, inside the outer envelope.
	mod, _ := os.ReadFile(module)
	if len(seen)-before < len(mod) {
		t.Fatalf("the tap carried %d bytes during the job, less than the module: the job did not go through it", len(seen)-before)
	}
	for _, plain := range []string{secret, strings.ToUpper(secret), "relay must not"} {
		if bytes.Contains(bytes.ToLower(seen), []byte(strings.ToLower(plain))) {
			t.Fatalf("the relay saw %q in the bytes it carried", plain)
		}
	}
}

// TestComputeNIP90: nostr-tools against a node whose NIP-90 bridge is
// on (interop/nostr/nip90.mjs): a 5970 request gets a 7000 processing
// then a valid mined event, a 5400 a count, and no payment field is
// ever emitted. The node is in a mesh with one executor, and the script
// also runs the fleetmesh WebAssembly kind (5990) through the bridge,
// timing request to result: FLEETMESH_NIP90_RUNS sets how many runs
// (docs/benchmarks/compute.md), 3 by default.
func TestComputeNIP90(t *testing.T) {
	needNode(t)
	module := wasmFile(t, "upper")
	eh := newHome(t, computeConfig)
	e := startMeshNode(t, eh)
	rh := newHome(t, accountingConfig+"\n[relay]\nevents_per_second = 0\nip_events_per_second = 0\n\n[compute]\nnip90 = true\n")
	r := startMeshNode(t, rh, e.mesh)
	mod, err := os.ReadFile(module)
	if err != nil {
		t.Fatal(err)
	}
	runs := 3
	if s := os.Getenv("FLEETMESH_NIP90_RUNS"); s != "" {
		fmt.Sscan(s, &runs)
	}
	// "spin 4000000 " runs an empty loop of about 10 ms in the sandbox
	// before upper-casing the input.
	input := "spin 4000000 nip90"
	// The executor's descriptor reaches the bridge's node a moment after
	// it connects: wait until a job can be planned.
	in := filepath.Join(t.TempDir(), "in")
	if err := os.WriteFile(in, []byte("ready"), 0o644); err != nil {
		t.Fatal(err)
	}
	if j := runJob(t, rh, module, in, 1); j.Outcome != "ok" {
		t.Fatalf("warm-up job: %+v", j)
	}
	times := filepath.Join(t.TempDir(), "times.json")
	runScript(t, r.node, "nip90.mjs", map[string]any{"wasm": map[string]any{
		"module": base64.StdEncoding.EncodeToString(mod), "cid": moduleCID(mod), "input": base64.StdEncoding.EncodeToString([]byte(input)),
		"want": strings.ToUpper(input), "runs": runs, "out": times,
	}})
	b, err := os.ReadFile(times)
	if err != nil {
		t.Fatalf("the script timed no WebAssembly job: %v", err)
	}
	t.Logf("5990 request to result over the bridge: %s", b)
}

var (
	cheatOnce sync.Once
	cheatBin  string
	cheatErr  error
)

// cheatBinary builds fleetmesh with the e2echeat tag once: a binary whose
// executor, given FLEETMESH_E2E_CHEAT=wrong, returns wrong outputs
// (node/cheat_e2e.go). Releases are built without the tag.
func cheatBinary(t *testing.T) string {
	t.Helper()
	cheatOnce.Do(func() {
		cheatBin = filepath.Join(filepath.Dir(binary), "fleetmesh-e2echeat")
		cmd := exec.Command("go", "build", "-tags", "e2echeat", "-o", cheatBin, "./cmd/fleetmesh")
		cmd.Dir = moduleRoot
		if out, err := cmd.CombinedOutput(); err != nil {
			cheatErr = fmt.Errorf("go build -tags e2echeat: %v\n%s", err, out)
		}
	})
	if cheatErr != nil {
		t.Fatal(cheatErr)
	}
	return cheatBin
}

// startCheater runs the e2echeat binary on home, dialling boot, with
// the env given (FLEETMESH_E2E_CHEAT=…, node/cheat_e2e.go; none: honest).
func startCheater(t *testing.T, home, boot string, env ...string) *node {
	t.Helper()
	cmd := exec.Command(cheatBinary(t), "run", "--home", home, "--listen", "127.0.0.1:0",
		"--mesh-listen", "/ip4/127.0.0.1/tcp/0", "--bootstrap", boot)
	cmd.Env = append(os.Environ(), env...)
	n, err := startNodeCmd(t, home, cmd)
	if err != nil {
		t.Fatal(err)
	}
	n.did = runID(t, home).DID
	return n
}

// caughtIn runs jobs on two executors at home until one names did as
// caught, within a bounded number of jobs, and returns that job.
func caughtIn(t *testing.T, home, module, input, did string) jobJSON {
	t.Helper()
	for range 10 {
		j := runJob(t, home, module, input, 2)
		for _, r := range j.Runs {
			if r.Executor == did && r.Caught != "" {
				return j
			}
		}
	}
	t.Fatalf("10 jobs ran and %s was never caught", did)
	return jobJSON{}
}

// TestComputeCheatersCaught: real processes. An executor that served
// honestly long enough to have standing at the requester starts
// returning wrong results: the requester's audit catches it on its first
// wrong job (it is still in its warm-up), the verdict stays the honest
// output, the units it claims are not counted so the window with it is
// disputed, and its standing at the requester falls to zero (a wall).
// It comes back under a fresh identity (a Sybil) that claims none of
// its units, is caught on its first job again, and is walled all the
// same: the requester refuses the window with a caught executor.
func TestComputeCheatersCaught(t *testing.T) {
	needBinary(t)
	cheatBinary(t)
	module := wasmFile(t, "upper")
	cfg := "\n[standing]\nrecompute = '2s'\nwalks = 2000\n\n[log]\nlevel = 'debug'\n"
	rh := newHome(t, accountingConfig+cfg)
	r := startMeshNode(t, rh)
	h := startMeshNode(t, newHome(t, computeConfig+cfg), r.mesh)
	_ = h
	ch := newHome(t, computeConfig+cfg)
	c := startCheater(t, ch, r.mesh)
	// About 800 compute units a job: beyond the receipts' slack.
	input := filepath.Join(t.TempDir(), "input")
	if err := os.WriteFile(input, []byte("spin 1000000 honest work"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Honest service first, until the requester gives it standing.
	deadline := time.Now().Add(60 * time.Second)
	for standingOf(t, rh, c.did).Standing == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the executor %s earned no standing at the requester: %+v", c.did, standingOf(t, rh, c.did))
		}
		if j := runJob(t, rh, module, input, 2); j.Outcome != "ok" {
			t.Fatalf("honest job: %+v", j)
		}
		time.Sleep(time.Second)
	}
	honest := standingOf(t, rh, c.did)
	before := honest.Standing
	// Both sides count each job's units in the window of the time the
	// executor metered them (spec/compute.md "Accounting"), so honest
	// service is normally undisputed; a late judgement past the window's
	// seal can still split a job, so this is reported, not required.
	t.Logf("honest service: %+v at the requester", honest)
	// Now it cheats: its operator restarts it into a cheating binary. The
	// stop saves the open window's figures (spec/disputes.md "Stops"), so
	// the honest jobs of that window stay counted: killed instead, the
	// cheat would lose them and, its cheating job's units standing in for
	// them, might agree the window (the flake this test once had).
	if err := c.stop(); err != nil {
		t.Fatalf("stopping the honest executor: %v", err)
	}
	c = startCheater(t, ch, r.mesh, "FLEETMESH_E2E_CHEAT=wrong")
	j := caughtIn(t, rh, module, input, c.did)
	if j.Outcome != "ok" || !strings.HasPrefix(string(j.Output), "SPIN 1000000 HONEST WORK") || !j.Audited {
		t.Fatalf("the job with the cheat: %+v, want the honest output, audited", j)
	}
	// The dispute needs the cheat's window closed, both sides' proposals
	// compared and the standing recomputed: generous under load.
	deadline = time.Now().Add(120 * time.Second)
	for {
		s := standingOf(t, rh, c.did)
		if s.Standing == 0 && s.Wall {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the cheat's standing at the requester is %+v, had %v: want 0, a wall; the requester's receipts with it: %+v\nrequester's accounting:\n%s\ncheat's accounting:\n%s", s, before, receipts(t, rh, c.did),
				grepLines(r.output(), "accounting"), grepLines(c.output(), "accounting"))
		}
		time.Sleep(time.Second)
	}
	// A fresh identity, and silent: it meters none of the units it
	// gives, so it claims nothing the requester could dispute. It is
	// caught on its first job too, and the requester's refusal of the
	// window with it (spec/disputes.md "Refused windows") walls it.
	c.kill()
	sybil := startCheater(t, newHome(t, computeConfig+cfg), r.mesh, "FLEETMESH_E2E_CHEAT=silent")
	if sybil.did == c.did {
		t.Fatal("the Sybil has the cheat's DID")
	}
	caughtIn(t, rh, module, input, sybil.did)
	deadline = time.Now().Add(120 * time.Second)
	for {
		s := standingOf(t, rh, sybil.did)
		if s.Wall && s.Disputes > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the silent Sybil's standing at the requester is %+v: want a wall and its disputed window\nrequester's accounting:\n%s", s, grepLines(r.output(), "accounting"))
		}
		time.Sleep(time.Second)
	}
	resp, err := http.Get(r.httpURL() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if !regexp.MustCompile(`(?m)^fleetmesh_compute_disputes_total [2-9]`).Match(body) {
		t.Fatalf("/metrics does not count two disputes:\n%s", grepLines(string(body), "fleetmesh_compute"))
	}
}

// nodeStanding is one entry of `fleetmesh standing --json`.
type nodeStanding struct {
	Standing float64 `json:"standing"`
	Wall     bool    `json:"wall"`
	Disputes int     `json:"disputes"`
}

// standingOf is the standing home gives did.
func standingOf(t *testing.T, home, did string) nodeStanding {
	t.Helper()
	out, errOut, err := cli(t, "standing", "--home", home, "--of", did, "--json")
	if err != nil {
		t.Fatalf("fleetmesh standing: %v\n%s", err, errOut)
	}
	var es []nodeStanding
	if err := json.Unmarshal([]byte(out), &es); err != nil || len(es) != 1 {
		t.Fatalf("fleetmesh standing --of --json printed %q: %v", out, err)
	}
	return es[0]
}

// TestComputeLazyCopierCaught: real processes. A lazy copier commits to
// a guess without running the job, then reveals the output a colluding
// executor of the same job left for it: its reveal does not open its
// commitment, so it is caught, while the job's verdict is the honest
// output.
func TestComputeLazyCopierCaught(t *testing.T) {
	needBinary(t)
	cheatBinary(t)
	module := wasmFile(t, "upper")
	rh := newHome(t, accountingConfig)
	r := startMeshNode(t, rh)
	share := t.TempDir()
	startCheater(t, newHome(t, computeConfig), r.mesh, "FLEETMESH_E2E_CHEAT=share", "FLEETMESH_E2E_SHARE="+share)
	copier := startCheater(t, newHome(t, computeConfig), r.mesh, "FLEETMESH_E2E_CHEAT=copy", "FLEETMESH_E2E_SHARE="+share)
	input := filepath.Join(t.TempDir(), "input")
	if err := os.WriteFile(input, []byte("copy me"), 0o644); err != nil {
		t.Fatal(err)
	}
	j := caughtIn(t, rh, module, input, copier.did)
	if j.Outcome != "ok" || string(j.Output) != "COPY ME" {
		t.Fatalf("job: %+v, want the honest output", j)
	}
	for _, run := range j.Runs {
		if run.Executor == copier.did && run.Caught != "reveal does not open its commitment" {
			t.Fatalf("the copier was caught for %q, want its commitment", run.Caught)
		}
	}
}
