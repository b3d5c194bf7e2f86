//go:build linux

package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// leafLabConfig is the home node's config in the leaf lab: no mDNS, so
// nothing multicasts onto the leaf's link, and no rate limit.
const leafLabConfig = `[relay]
events_per_second = 0
ip_events_per_second = 0

[mesh]
mdns = false
`

// leafCounters reads the iptables counters in the leaf's namespace: the
// IP packets and bytes the leaf sent and received, of every protocol
// (the namespace has IPv6 off, so IPv4 is all its IP), and the TCP
// connections it opened (SYNs).
type leafCounters struct {
	outPkts, outBytes, inPkts, inBytes, syns int64
}

func readLeafCounters(t *testing.T, lab *netLab, ns string) leafCounters {
	t.Helper()
	rows := func(chain string) [][2]int64 {
		out, err := lab.cmd("ip", "netns", "exec", ns, lab.iptables, "-t", "filter", "-L", chain, "-v", "-x", "-n")
		if err != nil {
			t.Fatalf("iptables -L %s: %v\n%s", chain, err, out)
		}
		var rs [][2]int64
		for _, line := range strings.Split(out, "\n") {
			f := strings.Fields(line)
			if len(f) < 3 {
				continue
			}
			p, err := strconv.ParseInt(f[0], 10, 64)
			if err != nil {
				continue // the chain and column headers
			}
			b, _ := strconv.ParseInt(f[1], 10, 64)
			rs = append(rs, [2]int64{p, b})
		}
		return rs
	}
	o, i := rows("OUTPUT"), rows("INPUT")
	if len(o) != 2 || len(i) != 1 {
		t.Fatalf("counting rules: OUTPUT %v INPUT %v", o, i)
	}
	return leafCounters{syns: o[0][0], outPkts: o[1][0], outBytes: o[1][1], inPkts: i[0][0], inBytes: i[0][1]}
}

// TestLeafSilentWhenSuspended runs a home node and a `fleetmesh leaf` in
// two network namespaces joined by one link, counting the leaf's traffic
// with iptables: between wakes the leaf sends and receives zero bytes;
// an empty wake (nothing queued, nothing new) is counted and logged.
func TestLeafSilentWhenSuspended(t *testing.T) {
	needBinary(t)
	lab := newNetLab(t)
	homeNS, leafNS := lab.addNS("lhome"), lab.addNS("leaf")
	lab.veth(homeNS, "h0", leafNS, "l0")
	lab.addr(homeNS, "h0", "10.77.0.1/24")
	lab.addr(leafNS, "l0", "10.77.0.2/24")
	// No IPv6 on the leaf's side, so the IPv4 counters below see all of
	// its IP traffic (no link-local or neighbour discovery uncounted).
	lab.must("ip", "netns", "exec", leafNS, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1")
	for _, rule := range [][]string{
		{"-A", "OUTPUT", "-o", "l0", "-p", "tcp", "--syn"}, // counts, and goes on
		{"-A", "OUTPUT", "-o", "l0", "-j", "ACCEPT"},
		{"-A", "INPUT", "-i", "l0", "-j", "ACCEPT"},
	} {
		lab.must("ip", append([]string{"netns", "exec", leafNS, lab.iptables}, rule...)...)
	}

	home := newHome(t, leafLabConfig)
	if _, err := startNodeCmd(t, home, exec.Command("ip", "netns", "exec", homeNS, binary, "run", "--home", home, "--listen", "10.77.0.1:7447")); err != nil {
		t.Fatal(err)
	}
	inv, errOut, err := cli(t, "didcomm", "invite", "--home", home, "--endpoint", "http://10.77.0.1:7447/didcomm")
	if err != nil {
		t.Fatalf("invite: %v %s", err, errOut)
	}
	leafHome := filepath.Join(t.TempDir(), "leaf")
	args := []string{"netns", "exec", leafNS, binary, "leaf", "--home", leafHome, "--pair", strings.TrimSpace(inv),
		"--subscribe", `{"kinds":[1]}`, "--wake-interval", "1h", "--budget", "20s"}
	leaf := exec.Command("ip", args...)
	out, err := leaf.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := leaf.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = leaf.Process.Kill()
		_ = leaf.Wait()
	})
	lines := make(chan string, 4)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	var first map[string]any
	select {
	case l, ok := <-lines:
		if !ok || json.Unmarshal([]byte(l), &first) != nil || first["caught_up"] != true {
			t.Fatalf("first wake printed %q", l)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the leaf printed no wake summary within 60 s")
	}
	// The wake has closed its sockets; let the last FIN/ACKs pass.
	time.Sleep(time.Second)
	before := readLeafCounters(t, lab, leafNS)
	time.Sleep(5 * time.Second) // suspended: the leaf sleeps its wake interval
	after := readLeafCounters(t, lab, leafNS)
	if after != before {
		t.Fatalf("suspended leaf moved traffic: before %+v, after %+v", before, after)
	}
	t.Logf("suspended 5 s: 0 packets, 0 bytes each way")
	_ = leaf.Process.Kill()
	_ = leaf.Wait()

	// An empty wake, counted by the kernel.
	c0 := readLeafCounters(t, lab, leafNS)
	wake := exec.Command("ip", append(args[:len(args)-4], "--once")...)
	sum, err := wake.Output()
	if err != nil {
		t.Fatalf("leaf --once: %v", err)
	}
	time.Sleep(time.Second)
	c1 := readLeafCounters(t, lab, leafNS)
	var s map[string]any
	if err := json.Unmarshal(sum, &s); err != nil || s["caught_up"] != true || s["picked_up"] != float64(0) {
		t.Fatalf("empty wake printed %s", sum)
	}
	if c1.syns-c0.syns < 1 {
		t.Fatalf("the empty wake opened no connection: %+v -> %+v", c0, c1)
	}
	t.Logf("empty wake (iptables): %s", fmt.Sprintf("%d connections, sent %d packets %d bytes, received %d packets %d bytes (all IP, headers included); the leaf counted: %s",
		c1.syns-c0.syns, c1.outPkts-c0.outPkts, c1.outBytes-c0.outBytes, c1.inPkts-c0.inPkts, c1.inBytes-c0.inBytes, strings.TrimSpace(string(sum))))
}
