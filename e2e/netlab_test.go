//go:build linux

package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// netLab is a small internet the test builds from network namespaces,
// veth pairs, a bridge and NAT routers (iptables MASQUERADE), in the manner
// of tailscale's natlab but with the kernel's own NAT. Nothing in it is
// connected to the machine's network: the root namespace gets no interface,
// route or rule, so its traffic cannot leave it. Every namespace, and with
// it every veth and iptables rule, is removed when the test ends.
type netLab struct {
	t      *testing.T
	prefix string
	// iptables is the iptables command that works in this kernel.
	iptables   string
	namespaces []string
	rules      [][]string // iptables rules added, as (namespace, args...)
}

// labCmdTimeout bounds one ip/iptables/tc command.
const labCmdTimeout = 20 * time.Second

// labNSPrefix starts the name of every namespace a lab makes, followed by
// the test process's PID.
const labNSPrefix = "fmlab"

// newNetLab checks the kernel lets this process make network namespaces
// and skips the test, saying why, when it does not: only then.
func newNetLab(t *testing.T) *netLab {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("network namespaces need root (CAP_SYS_ADMIN, CAP_NET_ADMIN); run as root, as CI does")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Fatal("the ip command (iproute2) is missing: apt-get install iproute2 (scripts/test.sh does)")
	}
	b := make([]byte, 3)
	rand.Read(b)
	// The prefix names this process, so that a later run can tell a lab
	// left behind by a killed run (no cleanup runs then) from a live one.
	l := &netLab{t: t, prefix: fmt.Sprintf("%s%d-%s", labNSPrefix, os.Getpid(), hex.EncodeToString(b))}
	l.sweepStale()
	t.Cleanup(l.teardown)
	probe := l.prefix + "-probe"
	if out, err := l.cmd("ip", "netns", "add", probe); err != nil {
		t.Skipf("the kernel refuses network namespaces (ip netns add: %v: %s)", err, strings.TrimSpace(out))
	}
	l.namespaces = append(l.namespaces, probe)
	l.iptables = l.findIPTables(probe)
	return l
}

// findIPTables returns the first of iptables, iptables-nft and
// iptables-legacy that can add a NAT rule in this kernel.
func (l *netLab) findIPTables(ns string) string {
	var tried []string
	for _, c := range []string{"iptables", "iptables-nft", "iptables-legacy"} {
		if _, err := exec.LookPath(c); err != nil {
			continue
		}
		rule := []string{"-t", "nat", "-A", "POSTROUTING", "-o", "lo", "-j", "MASQUERADE"}
		out, err := l.cmd("ip", append([]string{"netns", "exec", ns, c}, rule...)...)
		if err == nil {
			l.cmd("ip", "netns", "exec", ns, c, "-t", "nat", "-D", "POSTROUTING", "-o", "lo", "-j", "MASQUERADE")
			return c
		}
		tried = append(tried, fmt.Sprintf("%s: %v: %s", c, err, strings.TrimSpace(out)))
	}
	if len(tried) == 0 {
		l.t.Fatal("no iptables command: apt-get install iptables (scripts/test.sh does)")
	}
	l.t.Fatalf("no iptables works in this kernel:\n%s", strings.Join(tried, "\n"))
	return ""
}

// cmd runs a command and returns its combined output.
func (l *netLab) cmd(name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), labCmdTimeout)
	defer cancel()
	var out bytes.Buffer
	c := exec.CommandContext(ctx, name, args...)
	c.Stdout, c.Stderr = &out, &out
	err := c.Run()
	return out.String(), err
}

// must runs a command and fails the test if it fails.
func (l *netLab) must(name string, args ...string) {
	l.t.Helper()
	if out, err := l.cmd(name, args...); err != nil {
		l.t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
}

// addNS makes a namespace named prefix-name with its loopback up and
// returns its name.
func (l *netLab) addNS(name string) string {
	l.t.Helper()
	ns := l.prefix + "-" + name
	l.must("ip", "netns", "add", ns)
	l.namespaces = append(l.namespaces, ns)
	l.must("ip", "-n", ns, "link", "set", "lo", "up")
	return ns
}

// veth joins two namespaces with a veth pair, aIf in a and bIf in b, and
// brings both up.
func (l *netLab) veth(a, aIf, b, bIf string) {
	l.t.Helper()
	l.must("ip", "-n", a, "link", "add", aIf, "type", "veth", "peer", "name", bIf, "netns", b)
	l.must("ip", "-n", a, "link", "set", aIf, "up")
	l.must("ip", "-n", b, "link", "set", bIf, "up")
}

// addr gives an interface an address (CIDR).
func (l *netLab) addr(ns, ifname, cidr string) {
	l.t.Helper()
	l.must("ip", "-n", ns, "addr", "add", cidr, "dev", ifname)
}

// bridge makes a bridge in ns and returns a function that plugs an
// interface of ns into it.
func (l *netLab) bridge(ns, name string) func(port string) {
	l.t.Helper()
	l.must("ip", "-n", ns, "link", "add", name, "type", "bridge")
	l.must("ip", "-n", ns, "link", "set", name, "up")
	return func(port string) {
		l.t.Helper()
		l.must("ip", "-n", ns, "link", "set", port, "master", name)
	}
}

// natRouter makes ns forward between its LAN and WAN interfaces and
// masquerade what leaves by wan, as a home router does, and, as a home
// router's firewall does, silently drop unsolicited packets that arrive on
// wan for the router itself (rather than answer with a TCP reset or an
// ICMP error).
func (l *netLab) natRouter(ns, wan string) {
	l.t.Helper()
	l.must("ip", "netns", "exec", ns, "sysctl", "-qw", "net.ipv4.ip_forward=1")
	for _, rule := range [][]string{
		{"-t", "nat", "-A", "POSTROUTING", "-o", wan, "-j", "MASQUERADE"},
		{"-t", "filter", "-A", "INPUT", "-i", wan, "-m", "conntrack", "--ctstate", "NEW,INVALID", "-j", "DROP"},
	} {
		l.must("ip", append([]string{"netns", "exec", ns, l.iptables}, rule...)...)
		l.rules = append(l.rules, append([]string{ns}, rule...))
	}
}

// delay adds netem delay on an interface if the kernel has netem; it
// reports whether it could.
func (l *netLab) delay(ns, ifname string, d time.Duration) bool {
	l.t.Helper()
	out, err := l.cmd("ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", ifname, "root", "netem", "delay", d.String())
	if err != nil {
		l.t.Logf("no netem delay on %s/%s (%v: %s): the kernel lacks sch_netem, links run at veth speed", ns, ifname, err, strings.TrimSpace(out))
		return false
	}
	return true
}

// sweepStale removes the namespaces of labs whose test process is gone (a
// run killed by a timeout runs no cleanup), first killing the fleetmesh
// processes that run did start in them.
func (l *netLab) sweepStale() {
	out, err := l.cmd("ip", "netns", "list")
	if err != nil {
		return
	}
	for _, line := range strings.Split(out, "\n") {
		name, _, _ := strings.Cut(strings.TrimSpace(line), " ")
		rest, ok := strings.CutPrefix(name, labNSPrefix)
		if !ok {
			continue
		}
		pid, _, _ := strings.Cut(rest, "-")
		if _, err := strconv.Atoi(pid); err != nil {
			continue
		}
		if _, err := os.Stat("/proc/" + pid); err == nil {
			continue // its run is alive
		}
		pids, _ := l.cmd("ip", "netns", "pids", name)
		for _, p := range strings.Fields(pids) {
			if n, err := strconv.Atoi(p); err == nil {
				syscall.Kill(n, syscall.SIGKILL)
			}
		}
		if out, err := l.cmd("ip", "netns", "del", name); err != nil {
			l.t.Logf("removing stale lab namespace %s: %v: %s", name, err, out)
		} else {
			l.t.Logf("removed stale lab namespace %s (its test run, pid %s, is gone)", name, pid)
		}
	}
}

// teardown removes every rule and namespace the lab made and checks none
// is left.
func (l *netLab) teardown() {
	for _, r := range l.rules {
		del := append([]string{"netns", "exec", r[0], l.iptables}, r[1:]...)
		for i, a := range del {
			if a == "-A" {
				del[i] = "-D"
			}
		}
		if out, err := l.cmd("ip", del...); err != nil {
			l.t.Logf("removing iptables rule in %s: %v: %s", r[0], err, out)
		}
	}
	for i := len(l.namespaces) - 1; i >= 0; i-- {
		if out, err := l.cmd("ip", "netns", "del", l.namespaces[i]); err != nil {
			l.t.Errorf("ip netns del %s: %v: %s", l.namespaces[i], err, out)
		}
	}
	out, err := l.cmd("ip", "netns", "list")
	if err != nil {
		l.t.Errorf("ip netns list: %v: %s", err, out)
		return
	}
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, l.prefix) {
			l.t.Errorf("namespace left behind: %s", line)
		}
	}
}

// httpClient is an HTTP client that dials from inside ns. Keep-alives are
// off: a client made per request would leave its idle connection open for
// the node's 60 s idle timeout, and a poll loop would run into the node's
// per-address connection cap (spec/limits.md) and read 429s.
func (l *netLab) httpClient(ns string) *http.Client {
	return &http.Client{
		Transport: &http.Transport{DialContext: l.dialer(ns), DisableKeepAlives: true},
		Timeout:   10 * time.Second,
	}
}

// dialer returns a DialContext that connects from inside ns: the socket
// is made on an OS thread moved into the namespace, and a socket stays in
// the namespace it was made in. The thread is never returned to the
// runtime, so no other goroutine runs in the wrong namespace.
func (l *netLab) dialer(ns string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		type result struct {
			c   net.Conn
			err error
		}
		done := make(chan result, 1)
		go func() {
			runtime.LockOSThread() // never unlocked: the thread exits with this goroutine
			fd, err := unix.Open("/run/netns/"+ns, unix.O_RDONLY|unix.O_CLOEXEC, 0)
			if err != nil {
				done <- result{err: fmt.Errorf("open namespace %s: %w", ns, err)}
				return
			}
			err = unix.Setns(fd, unix.CLONE_NEWNET)
			unix.Close(fd)
			if err != nil {
				done <- result{err: fmt.Errorf("enter namespace %s: %w", ns, err)}
				return
			}
			var d net.Dialer
			c, err := d.DialContext(ctx, network, addr)
			done <- result{c, err}
		}()
		r := <-done
		return r.c, r.err
	}
}
