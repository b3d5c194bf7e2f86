package node

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"sync/atomic"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/prometheus/client_golang/prometheus"

	"fleetmesh.org/fleetmesh/accounting"
	"fleetmesh.org/fleetmesh/clientaddr"
	"fleetmesh.org/fleetmesh/didcomm/agent"
	"fleetmesh.org/fleetmesh/dpop"
	"fleetmesh.org/fleetmesh/mesh"
	"fleetmesh.org/fleetmesh/meter"
	"fleetmesh.org/fleetmesh/receipt"
	"fleetmesh.org/fleetmesh/relay"
)

// AccountingDir holds the accounting state (receipts, grants) in a node
// home.
const AccountingDir = "accounting"

// ControlSocket is the node's control socket in its home: a Unix socket
// (mode 0600) through which `fleetmesh grants` and `fleetmesh receipts`
// talk to the running node.
const ControlSocket = "accounting.sock"

// ControlPath is the control socket's path.
func (h Home) ControlPath() string { return h.Path(ControlSocket) }

// accountingPart is the node's accounting: the meter the services count
// into, the window loop, and the control socket.
type accountingPart struct {
	meter *meter.Meter
	s     *accounting.Service
	// ready is s once open has run, for the sync service's grant check,
	// which may run before.
	ready atomic.Pointer[accounting.Service]
	ctl   *http.Server
	// mux is the control socket's routes; other parts add theirs before
	// start (compute's POST /jobs/run).
	mux *http.ServeMux
	ln  net.Listener
	// standing is the node's standing view, fed from s.
	standing *standingPart
}

// newMeter makes the node's meter; the mesh and the agent count into it
// from the start, and open adds the rest once they exist.
func newMeter(opts Options) *accountingPart {
	return &accountingPart{meter: meter.New(opts.Key.PeerID(), opts.Config.Accounting.Window.Duration, time.Now())}
}

// allow is the services' grant check: may this node give p n units of
// svc (nil until accounting opens)?
func (ap *accountingPart) allow(p peer.ID, svc meter.Service, n uint64) error {
	s := ap.ready.Load()
	if s == nil {
		return nil
	}
	return s.Allow(p, svc, n)
}

// circuitHooks meter the circuit relay service (both the relay's side and
// a relayed node's) and ask the grants before the relay serves: a
// reservation or a circuit needs a unit of circuit time and of circuit
// bytes left for each end. A circuit that then runs past the grant is
// bounded by the relay's own per-circuit limits ([mesh.relay_limits]).
func (ap *accountingPart) circuitHooks() mesh.CircuitHooks {
	dir := func(relaying bool) meter.Direction {
		if relaying {
			return meter.Gave
		}
		return meter.Received
	}
	allow := func(p peer.ID) error {
		if err := ap.allow(p, meter.CircuitSeconds, 1); err != nil {
			return err
		}
		return ap.allow(p, meter.CircuitBytes, 1)
	}
	return mesh.CircuitHooks{
		Bytes: func(p peer.ID, relaying bool, n int) {
			ap.meter.Record(p, meter.CircuitBytes, dir(relaying), uint64(n))
		},
		Opened: func(p peer.ID, relaying bool) func() {
			return ap.meter.Start(p, meter.CircuitSeconds, dir(relaying)).End
		},
		AllowReserve: allow,
		AllowConnect: func(src, dest peer.ID) error {
			if err := allow(src); err != nil {
				return err
			}
			return allow(dest)
		},
	}
}

// page answers the sync protocol's RECEIPTS (nil until accounting opens:
// then the node holds nothing to answer with).
func (ap *accountingPart) page(node, after string) (receipt.Page, error) {
	s := ap.ready.Load()
	if s == nil {
		return receipt.Page{}, errors.New("accounting is starting; ask again")
	}
	return s.Page(node, after)
}

// open opens the accounting on the node's agent and host; fetch is how it
// asks peers for records over the mesh (the sync protocol's client).
func (ap *accountingPart) open(opts Options, dc *agent.Service, h host.Host, fetch accounting.PageFetcher, reg prometheus.Registerer) error {
	s, err := accounting.New(opts.Key, opts.Config.Accounting.Config, opts.Home.Path(AccountingDir), ap.meter, dc, h, reg, opts.Log)
	if err != nil {
		return err
	}
	s.SetFetcher(fetch)
	dc.SetMeter(ap.meter)
	dc.SetQueueGrant(s.AllowQueue)
	s.SetLeaves(dc.Mediates)
	path := opts.Home.ControlPath()
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		s.Close()
		return fmt.Errorf("node: control socket: %w", err)
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		s.Close()
		return fmt.Errorf("node: control socket %s: %w", path, err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		s.Close()
		return fmt.Errorf("node: control socket: %w", err)
	}
	sp, err := newStandingPart(opts, s, reg)
	if err != nil {
		ln.Close()
		s.Close()
		return err
	}
	ap.s, ap.ln, ap.standing = s, ln, sp
	ap.ready.Store(s)
	ctl := http.NewServeMux()
	ctl.HandleFunc("GET /standing", sp.serve)
	ctl.Handle("/", s.ControlHandler())
	ap.mux = ctl
	ap.ctl = &http.Server{Handler: ctl, ReadHeaderTimeout: 10 * time.Second}
	return nil
}

// meterRelay has the relay meter what it serves a leaf: a DPoP proof on
// the upgrade names the connection's DID, taken only from a DID this node
// mediates for, and the events sent to and accepted from it count as
// service given to and received from that leaf (spec/leaf.md "Metering
// the relay connection").
func (ap *accountingPart) meterRelay(rl *relay.Relay, dc *agent.Service) {
	v := &dpop.Verifier{URLs: []string{rl.Config().URL}, Allow: func(did string) error {
		if !dc.Mediates(did) {
			return fmt.Errorf("this node does not mediate for %s: pair with it first", did)
		}
		return nil
	}}
	rl.Identify = v.Identify
	rl.Served = meter.RelayServed(ap.meter)
}

// mount serves the public endpoints on the relay port, their mesh
// fetches held to a quota per address (behind proxies as the relay keys
// it).
func (ap *accountingPart) mount(mux *http.ServeMux, proxies clientaddr.Proxies) {
	receipts, reports := ap.s.PublicHandlers(func(r *http.Request) string { return proxies.OfRequest(r).Narrow })
	mux.HandleFunc("/accounting/receipts", receipts)
	mux.HandleFunc("/accounting/reports", reports)
}

func (ap *accountingPart) start() {
	go ap.ctl.Serve(ap.ln)
	ap.s.Start()
	ap.standing.start()
}

func (ap *accountingPart) close() error {
	ap.ctl.Close()
	ap.standing.close()
	return ap.s.Close()
}
