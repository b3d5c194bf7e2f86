package mesh

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/libp2p/go-libp2p/core/host"
	ma "github.com/multiformats/go-multiaddr"
	manet "github.com/multiformats/go-multiaddr/net"
)

// ErrListenAddrInUse is returned by Open and NewHost when a configured
// mesh listen address could not be bound, most often because another
// process holds it.
var ErrListenAddrInUse = errors.New("mesh: cannot listen on a configured address")

// DefaultPort is the mesh's default TCP and UDP port, libp2p's customary
// one (kubo's).
const DefaultPort = 4001

// DefaultListenAddrs are the listen addresses of a node whose operator
// chose none: TCP and QUIC on DefaultPort, on every IPv4 and IPv6
// interface.
func DefaultListenAddrs() []string {
	p := strconv.Itoa(DefaultPort)
	return []string{
		"/ip4/0.0.0.0/tcp/" + p, "/ip4/0.0.0.0/udp/" + p + "/quic-v1",
		"/ip6/::/tcp/" + p, "/ip6/::/udp/" + p + "/quic-v1",
	}
}

// fallBack returns addrs with every address whose port is in use (all of
// them, with all) moved to port 0, logging each move.
func (m *Mesh) fallBack(addrs []string, all bool) []string {
	out := make([]string, 0, len(addrs))
	for _, a := range addrs {
		if shape := listenShape(a, true); shape != a && (all || errors.Is(bindError(a), syscall.EADDRINUSE)) {
			m.log.Warn("mesh: default listen address in use; listening on a free port instead (set [mesh] listen or --mesh-listen to choose one)", "addr", a, "instead", shape)
			a = shape
		}
		out = append(out, a)
	}
	return out
}

// checkListening fails if h does not listen on an address in want because
// that address is in use. libp2p starts a host as long as one of its listen
// addresses works, so a node whose TCP port another node holds would start
// on its other addresses and be unreachable at the one its peers were
// given. A wanted address with port 0 is matched by any listener of the
// same shape. An address missing for another reason (no IPv6 on the
// machine, say) is left to libp2p's own log, as before. The error names
// each address in use.
func checkListening(h host.Host, want []string) error {
	var missing []string
	for _, w := range want {
		anyPort := strings.Contains(w+"/", "/tcp/0/") || strings.Contains(w+"/", "/udp/0/")
		if !slices.ContainsFunc(h.Network().ListenAddresses(), func(g ma.Multiaddr) bool {
			return listenShape(g.String(), anyPort) == listenShape(w, anyPort)
		}) {
			missing = append(missing, w)
		}
	}
	return checkAddrsFree(missing)
}

// checkAddrsFree returns an error naming each address in addrs that a
// plain bind finds in use.
func checkAddrsFree(addrs []string) error {
	var errs []error
	for _, a := range addrs {
		if err := bindError(a); errors.Is(err, syscall.EADDRINUSE) {
			errs = append(errs, fmt.Errorf("%w %s: %v (another process holds it, another node perhaps: give each node its own [mesh] listen or --mesh-listen)", ErrListenAddrInUse, a, err))
		}
	}
	return errors.Join(errs...)
}

// listenShape is a listen multiaddr as compared by checkListening: with
// anyPort, the TCP or UDP port reads 0.
func listenShape(a string, anyPort bool) string {
	parts := strings.Split(a, "/")
	for i := 0; anyPort && i+1 < len(parts); i++ {
		if parts[i] == "tcp" || parts[i] == "udp" {
			parts[i+1] = "0"
		}
	}
	return strings.Join(parts, "/")
}

// bindError is the error of a plain bind of the TCP or UDP part of a, nil
// if it binds.
func bindError(a string) error {
	m, err := ma.NewMultiaddr(a)
	if err != nil {
		return err
	}
	// The first two components (ip and tcp or udp) are what binds.
	var head ma.Multiaddr
	for i, c := range m {
		if i == 2 {
			break
		}
		head = append(head, c)
	}
	network, addr, err := manet.DialArgs(head)
	if err != nil {
		return err
	}
	switch network {
	case "tcp", "tcp4", "tcp6":
		ln, err := net.Listen(network, addr)
		if err != nil {
			return err
		}
		return ln.Close()
	case "udp", "udp4", "udp6":
		pc, err := net.ListenPacket(network, addr)
		if err != nil {
			return err
		}
		return pc.Close()
	}
	return nil
}
