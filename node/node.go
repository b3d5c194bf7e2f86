// Package node assembles a fleetmesh node from its parts: the identity key,
// the embedded store, the client relay, the DIDComm agent, the mesh and the
// HTTP endpoints beside them (/didcomm, /healthz, /metrics, and on request
// /debug/mesh and /debug/pprof/), and it owns their start and orderly
// shutdown. It decides the class a node declares when its config says auto
// (spec/mesh-nat.md).
//
// It is not where protocol logic lives: each part is its own package, and
// this one only connects them and decides the order in which they start
// and stop. When the node syncs and with whom (anti-entropy rounds, the
// durable co-holder sync, the push to relayed peers, the stages of a
// lookup) is meshsync.Scheduler's; the node signs its own descriptor
// (selfdescriptor.go). cmd/fleetmesh turns flags and the config file into
// a node.Home and calls Run.
package node

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"fleetmesh.org/fleetmesh/accounting"
	"fleetmesh.org/fleetmesh/boundary"
	"fleetmesh.org/fleetmesh/config"
	"fleetmesh.org/fleetmesh/dashboard"
	"fleetmesh.org/fleetmesh/didcomm/agent"
	"fleetmesh.org/fleetmesh/frontend"
	"fleetmesh.org/fleetmesh/identity"
	irohrelay "fleetmesh.org/fleetmesh/iroh/relay"
	"fleetmesh.org/fleetmesh/manage"
	"fleetmesh.org/fleetmesh/mesh"
	"fleetmesh.org/fleetmesh/nostr"
	"fleetmesh.org/fleetmesh/relay"
)

// KeyFile is the node key's file name in a node home.
const KeyFile = "node.key"

// DIDCommDir holds the DIDComm agent's state (the mediation queue) in a
// node home.
const DIDCommDir = "didcomm"

// Home is a node home directory: its key, its config file and its data.
type Home struct {
	Dir string
}

// KeyPath is the node key file.
func (h Home) KeyPath() string { return filepath.Join(h.Dir, KeyFile) }

// ConfigPath is the config file.
func (h Home) ConfigPath() string { return filepath.Join(h.Dir, config.FileName) }

// Path resolves a path from the config against the home.
func (h Home) Path(p string) string {
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(h.Dir, p)
}

// Init makes a node home: a new key (never replacing one) and a default
// config file (never replacing one). It is idempotent and reports whether
// it created the key.
func Init(h Home, class string) (key *identity.Key, created bool, err error) {
	if err := os.MkdirAll(h.Dir, 0o700); err != nil {
		return nil, false, fmt.Errorf("node: %w", err)
	}
	key, created, err = identity.LoadOrCreateKey(h.KeyPath())
	if err != nil {
		return nil, false, err
	}
	if _, err := os.Stat(h.ConfigPath()); errors.Is(err, os.ErrNotExist) {
		cfg := config.Default()
		if class != "" {
			cfg.Class = class
		}
		if err := cfg.Validate(); err != nil {
			return nil, false, err
		}
		data, err := cfg.Encode()
		if err != nil {
			return nil, false, err
		}
		f, err := os.OpenFile(h.ConfigPath(), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err != nil {
			return nil, false, fmt.Errorf("node: %w", err)
		}
		if _, err := f.Write(data); err != nil {
			f.Close()
			return nil, false, fmt.Errorf("node: %w", err)
		}
		if err := f.Close(); err != nil {
			return nil, false, fmt.Errorf("node: %w", err)
		}
	} else if err != nil {
		return nil, false, fmt.Errorf("node: %w", err)
	}
	return key, created, nil
}

// Options are what Run needs beyond the config file.
type Options struct {
	Home   Home
	Config config.Config
	Key    *identity.Key
	Log    *slog.Logger
	// Pprof mounts net/http/pprof at /debug/pprof/ on the relay port.
	Pprof bool
	// DebugMesh serves /debug/mesh on the relay port: the node's NAT
	// status and its libp2p connections, with peers' addresses.
	DebugMesh bool
	// Ready, if set, is called once the relay is listening, with the
	// ws:// URL of the address it listens on.
	Ready func(relayURL string)
	// Version is the build's version as `fleetmesh version` says it, for
	// the status and the dashboard.
	Version string
	// MeshRole, with [store] backend = 'postgres', is the node's mesh role
	// this front-end already holds (TakenRole after ErrRoleChanged); nil
	// takes it if no other front-end holds it.
	MeshRole *frontend.Role
}

// Node is a running node.
type Node struct {
	opts     Options
	boundary *boundary.Policy
	// lists are the operator's own bans and allows (NIP-86); listsFile
	// keeps them in the node home, nil when PostgreSQL does.
	lists     *manage.Lists
	listsFile *manage.FileStore
	store     EventStore
	// fe is the front-end's side of a PostgreSQL store shared with the
	// node's other front-ends; nil with Pebble. Without the mesh role
	// (fe.role nil) didcomm, mesh, acct, iroh and irohRelay are nil.
	fe *frontEndPart
	// roleChanged is closed when this front-end takes or loses the mesh
	// role (Serve then returns ErrRoleChanged).
	roleChanged chan struct{}
	roleOnce    sync.Once
	labels      *labelsPart // nil without the mesh role
	didcomm     *agent.Service
	compute     *computePart // nil without the mesh role
	relay       *relay.Relay
	mesh        *meshPart
	acct        *accountingPart
	iroh        *irohPart // nil when iroh is off
	irohOff     string    // why iroh is off, "" when it runs
	// irohRelay is the iroh relay an anchor serves; nil when off.
	irohRelay *irohrelay.Server
	ln        net.Listener
	srv       *http.Server
	reg       *prometheus.Registry
	lock      *homeLock
	dash      *dashboard.Dashboard // nil when disabled
	health    *healthChecks
	// errs keeps recent warnings and errors, statusToken reads the
	// status, started is when Serve began (node/status.go).
	errs        *errorRing
	statusToken string
	started     time.Time
	// gatewayStatus, set by a gateway, adds its side to the status.
	gatewayStatus func() StatusGateway
}

// Open opens the node's store and binds its listener; Serve then runs it.
// Splitting the two lets a caller learn the bound address before serving.
func Open(opts Options) (*Node, error) {
	if opts.Log == nil {
		opts.Log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	// Every part opened is pushed on undo; if Open fails, deferred code
	// closes them in reverse order, and the node, once returned, owns them.
	var undo closers
	ok := false
	defer func() {
		if !ok {
			undo.close()
		}
	}()
	lock, err := lockHome(opts.Home)
	if err != nil {
		return nil, err
	}
	undo.push(func() error { lock.release(); return nil })
	errs := newErrorRing(opts.Log.Handler())
	opts.Log = slog.New(errs)
	token, err := newStatusToken()
	if err != nil {
		return nil, err
	}
	cfg := opts.Config
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	// The file limit is raised and split before the store opens, so that
	// the store is held to its share from its first table; the relay
	// raises it again (a no-op) and logs the split.
	files, err := relay.RaiseFileLimit()
	if err != nil {
		opts.Log.Warn("node: file limit", "err", err)
	}
	st, pg, err := openStore(opts, files, opts.Log)
	if err != nil {
		return nil, err
	}
	undo.push(st.Close)
	reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "fleetmesh_store_bytes",
			Help: "Space the store's files take on disk, as storage_max_bytes counts it."},
			func() float64 { return float64(st.DiskBytes()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "fleetmesh_store_max_bytes",
			Help: "The store's bound, storage_max_bytes (0: none)."},
			func() float64 { return float64(st.MaxBytes()) }),
	)
	ln, err := net.Listen("tcp", cfg.Relay.Listen)
	if err != nil {
		return nil, fmt.Errorf("node: relay listen %s: %w (pick a free address with --listen)", cfg.Relay.Listen, err)
	}
	undo.push(func() error { return ln.Close() })
	rcfg := cfg.Relay.Config
	rcfg.Self = map[string]string{
		"did":         opts.Key.DID(),
		"peer_id":     opts.Key.PeerID().String(),
		"endpoint_id": opts.Key.EndpointID(),
		"class":       cfg.Class,
	}
	if rcfg.URL == "" {
		rcfg.URL = relay.LocalURL(ln.Addr())
	}
	policy, err := boundary.New(cfg.Boundary.Rules, opts.Log, reg)
	if err != nil {
		return nil, err
	}
	rl := relay.New(rcfg, st, opts.Log, reg)
	// Served through the relay's listener, a connection sends a burst of
	// OKs in one write rather than a syscall each.
	ln = rl.Listener(ln)
	rl.RejectEvent = append(rl.RejectEvent, policy.RelayHook)
	lists, listsFile, err := openManage(opts, st, pg, rl, reg)
	if err != nil {
		return nil, err
	}
	if listsFile != nil {
		undo.push(listsFile.Close)
	}
	undo.push(lists.Close)
	var fe *frontEndPart
	if pg != nil {
		if fe, err = openFrontEnd(opts, pg, rl, cfg.Relay.Listen); err != nil {
			return nil, err
		}
		undo.push(fe.close)
	}
	var (
		dc      *agent.Service
		acct    *accountingPart
		mp      *meshPart
		labels  *labelsPart
		cp      *computePart
		ip      *irohPart
		irohOff = "this front-end does not hold the node's mesh role"
	)
	if fe == nil || fe.role != nil {
		if dc, err = agent.New(opts.Key, opts.Home.Path(DIDCommDir), opts.Log); err != nil {
			return nil, err
		}
		undo.push(dc.Close)
		acct = newMeter(opts)
		if mp, err = openMesh(opts, st, rl, policy, acct); err != nil {
			return nil, err
		}
		undo.push(mp.close)
		if err := acct.open(opts, dc, mp.m.Host(), mp.sync.FetchReceipts, reg); err != nil {
			return nil, err
		}
		mp.rounds.SetPrefer(acct.standing.trusted)
		mp.m.SetStanding(acct.standing.score)
		if labels, err = openLabels(opts, rl, st, acct, nil, lists, reg); err != nil {
			return nil, err
		}
		if cp, err = openCompute(opts, dc, mp, acct, rl, st, reg); err != nil {
			return nil, err
		}
		undo.push(func() error { cp.close(); return nil })
		// DIDComm is reachable over the mesh only once the accounting has
		// registered its protocols: the mesh host is already connecting, and
		// a peer's proposal answered in between with "unsupported type" would
		// be taken for a node without accounting and its window disputed at
		// that peer alone.
		dc.AttachLibp2p(mp.m.Host())
		dc.TrustProxies(rcfg.TrustedProxies)
		acct.meterRelay(rl, dc)
		ip, irohOff = openIroh(opts, mp, dc, rl.FileBudget().Iroh)
		reg.MustRegister(newIrohCollector(ip))
		mp.registerMetrics(reg)
		reg.MustRegister(newMeshCollector(mp.m), newMeshObserver(mp))
	}
	if fe != nil {
		// Every front-end judges events by the labels alike: each takes
		// in the labels stored at any of them (the relay runs its
		// OnStored hooks on the feed's events), and one without the mesh
		// role weighs their labellers by the standing view the role's
		// holder shares.
		if fe.role == nil {
			if labels, err = openLabels(opts, rl, st, nil, &fe.standing, lists, reg); err != nil {
				return nil, err
			}
		} else {
			acct.standing.share = fe.shareStanding()
		}
	}

	var n *Node
	mux := http.NewServeMux()
	mux.HandleFunc(StatusPath, func(w http.ResponseWriter, r *http.Request) { n.serveStatus(w, r) })
	mux.HandleFunc(BackupPath, func(w http.ResponseWriter, r *http.Request) { n.serveBackup(w, r) })
	var irohRelay *irohrelay.Server
	if mp != nil {
		mux.Handle("/didcomm", dc)
		acct.mount(mux, rcfg.TrustedProxies)
		irohRelay = openIrohRelay(opts, mp, mux)
	} else {
		// A load balancer in front takes 503 to mean "try the next
		// front-end" (deploy/nginx-frontends.conf).
		notHere := func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, "this front-end does not hold the node's mesh role: another one serves this", http.StatusServiceUnavailable)
		}
		mux.HandleFunc("/didcomm", notHere)
		mux.HandleFunc("/accounting/", notHere)
	}
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	health := &healthChecks{}
	mux.Handle("/healthz", health)
	if opts.DebugMesh && mp != nil {
		mux.HandleFunc("/debug/mesh", mp.serveDebug)
	}
	var dash *dashboard.Dashboard
	if cfg.Dashboard.Enabled {
		dash = dashboard.New(reg, dashboard.Options{Config: cfg.Dashboard, Title: opts.Key.DID(),
			Headline: func() dashboard.Headline { return n.headline() }})
		mux.Handle("/dashboard", dash)
	}
	if opts.Pprof {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	}
	n = &Node{
		opts:        opts,
		errs:        errs,
		statusToken: token,
		boundary:    policy,
		lists:       lists,
		listsFile:   listsFile,
		store:       st,
		fe:          fe,
		roleChanged: make(chan struct{}),
		didcomm:     dc,
		relay:       rl,
		mesh:        mp,
		acct:        acct,
		labels:      labels,
		compute:     cp,
		iroh:        ip,
		irohOff:     irohOff,
		irohRelay:   irohRelay,
		ln:          ln,
		// An idle keep-alive connection holds a slot in the relay's accept
		// gate (spec/limits.md): it is closed after a minute.
		srv:    &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: time.Minute},
		reg:    reg,
		lock:   lock,
		dash:   dash,
		health: health,
	}
	n.mountWeb(mux, rl)
	ok = true
	return n, nil
}

// closers are the parts Open has opened so far, closed in reverse order
// when it fails.
type closers []func() error

func (c *closers) push(f func() error) { *c = append(*c, f) }

func (c closers) close() {
	for i := len(c) - 1; i >= 0; i-- {
		c[i]()
	}
}

// MeshAddrs are the node's libp2p multiaddrs with its PeerID, as another
// node would give them to --bootstrap; none on a front-end without the
// mesh role.
func (n *Node) MeshAddrs() []string {
	if n.mesh == nil {
		return nil
	}
	return n.mesh.addrs()
}

// Mesh is the node's mesh part, for tests and metrics; nil on a front-end
// without the mesh role.
func (n *Node) Mesh() *mesh.Mesh {
	if n.mesh == nil {
		return nil
	}
	return n.mesh.m
}

// RelayURL is the URL clients connect to.
func (n *Node) RelayURL() string { return n.relay.Config().URL }

// Store is the node's event store.
func (n *Node) Store() EventStore { return n.store }

// Relay is the node's client relay, for wiring hooks.
func (n *Node) Relay() *relay.Relay { return n.relay }

// Boundary is the node's boundary policy, which the mesh's replication
// path and the gateway apply too.
func (n *Node) Boundary() *boundary.Policy { return n.boundary }

// Accounting is the node's accounting: receipts, grants, reports; nil on
// a front-end without the mesh role.
func (n *Node) Accounting() *accounting.Service {
	if n.acct == nil {
		return nil
	}
	return n.acct.s
}

// Registry is the node's Prometheus registry, for other parts' metrics.
func (n *Node) Registry() *prometheus.Registry { return n.reg }

// Serve runs the node until ctx ends, then shuts down in order: stop
// taking messages, let in-flight saves commit and their OKs go out, stop
// HTTP, close the store. Nothing acknowledged is lost.
func (n *Node) Serve(ctx context.Context) error {
	n.started = time.Now()
	errc := make(chan error, 1)
	go func() { errc <- n.srv.Serve(n.ln) }()
	n.opts.Log.Info("relay listening", "url", n.RelayURL(), "did", n.opts.Key.DID(), "signatures", nostr.Backend)
	if n.mesh != nil {
		n.mesh.start(n.RelayURL())
		n.acct.start()
	}
	if n.labels != nil {
		n.labels.start()
	}
	if n.fe != nil {
		n.fe.start(func() { n.roleOnce.Do(func() { close(n.roleChanged) }) }, n.opts.Log.Warn)
	}
	if n.iroh != nil {
		n.iroh.start()
		n.iroh.waitIroh()
	}
	if err := n.writeRunFile(n.ln.Addr()); err != nil {
		n.opts.Log.Warn("fleetmesh status will not find this node", "err", err)
	}
	defer n.removeRunFile()
	// The dashboard samples the metrics until shutdown starts, so that it
	// never gathers from a part that is closing.
	stopDash := func() {}
	if n.dash != nil {
		dctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			n.dash.Run(dctx)
		}()
		stopDash = func() { cancel(); <-done }
	}
	if n.opts.Ready != nil {
		n.opts.Ready(relay.LocalURL(n.ln.Addr()))
	}
	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-errc:
	case <-n.roleChanged:
		serveErr = ErrRoleChanged
	}
	stopDash()
	n.opts.Log.Info("shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := n.relay.Shutdown(sctx); err != nil {
		n.opts.Log.Warn("relay shutdown", "err", err)
	}
	n.srv.Shutdown(sctx)
	if n.labels != nil {
		n.labels.close()
	}
	// Compute stops before accounting saves its figures (spec/disputes.md
	// "Stops"): a job ends here either counted or not run at all.
	if n.compute != nil {
		n.compute.close()
	}
	if n.acct != nil {
		if err := n.acct.close(); err != nil {
			n.opts.Log.Warn("accounting close", "err", err)
		}
	}
	if n.iroh != nil {
		n.iroh.close()
	}
	if n.irohRelay != nil {
		n.irohRelay.Close()
	}
	if n.mesh != nil {
		if err := n.mesh.close(); err != nil {
			n.opts.Log.Warn("mesh close", "err", err)
		}
		if err := n.didcomm.Close(); err != nil {
			n.opts.Log.Warn("didcomm close", "err", err)
		}
	}
	if n.fe != nil {
		if err := n.fe.close(); err != nil {
			n.opts.Log.Warn("front-end close", "err", err)
		}
	}
	if err := n.lists.Close(); err != nil {
		n.opts.Log.Warn("manage close", "err", err)
	}
	if n.listsFile != nil {
		if err := n.listsFile.Close(); err != nil {
			n.opts.Log.Warn("manage close", "err", err)
		}
	}
	err := n.store.Close()
	n.lock.release()
	if err != nil {
		return fmt.Errorf("node: close store: %w", err)
	}
	if errors.Is(serveErr, ErrRoleChanged) {
		return serveErr
	}
	if serveErr != nil && !errors.Is(serveErr, http.ErrServerClosed) {
		return serveErr
	}
	return nil
}
