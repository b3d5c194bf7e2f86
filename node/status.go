package node

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"fleetmesh.org/fleetmesh/frontend"
	"fleetmesh.org/fleetmesh/internal/progress"
)

// RunFile is the file a running node writes in its home so that
// `fleetmesh status --home DIR` can find it: where its status is served
// and the token that reads it. The node removes it at a clean shutdown; a
// node killed without warning leaves it behind, and status then says no
// node answers there.
const RunFile = "node.run"

// StatusPath is where a node serves its status on the relay port, to
// bearers of the token in its RunFile only: the status names peers'
// counts, errors and the storage in use, which is the operator's business.
const StatusPath = "/status"

// runInfo is RunFile's content.
type runInfo struct {
	PID   int    `json:"pid"`
	URL   string `json:"url"`
	Token string `json:"token"`
}

// Status is what `fleetmesh status` shows of a running node (StatusPath).
type Status struct {
	// Version is the build's version (Options.Version).
	Version string `json:"version"`
	DID     string `json:"did"`
	PeerID  string `json:"peer_id"`
	// Class is the class the node declares now; ClassConfig the one
	// configured (auto lets the NAT status decide).
	Class        string   `json:"class"`
	ClassConfig  string   `json:"class_config"`
	Reachability string   `json:"reachability"`
	RelayService bool     `json:"relay_service"`
	Relays       []string `json:"relays"`
	RelayURL     string   `json:"relay_url"`
	MeshAddrs    []string `json:"mesh_addrs"`
	// Peers is the number of connected mesh peers; PeerKinds splits it
	// by class and transport.
	Peers            int              `json:"peers"`
	PeerKinds        []StatusPeerKind `json:"peer_kinds"`
	AddressBookPeers int              `json:"address_book_peers"`
	Shards           StatusShards     `json:"shards"`
	Storage          StatusStorage    `json:"storage"`
	// Sync is the current catch-up of events other nodes have and this
	// one lacks, or the last one when none runs.
	Sync StatusSync `json:"sync"`
	// Iroh is the node's iroh endpoint.
	Iroh StatusIroh `json:"iroh"`
	// Gateway is a gateway's catch-up with its backend; absent on a node
	// that is not one (fleetmesh gateway sets it: SetGatewayStatus).
	Gateway *StatusGateway `json:"gateway,omitempty"`
	// FrontEnds, with [store] backend = 'postgres', are the node's
	// front-ends over the shared database, the one holding the mesh role
	// marked; MeshRole says whether this front-end does. Without the
	// role the mesh figures above are empty.
	FrontEnds []frontend.Member `json:"front_ends,omitempty"`
	MeshRole  bool              `json:"mesh_role"`
	// Errors are the most recent warnings and errors the node logged,
	// oldest first.
	Errors        []StatusError `json:"errors"`
	StartedAt     time.Time     `json:"started_at"`
	UptimeSeconds int64         `json:"uptime_seconds"`
}

// StatusPeerKind counts connected peers of one class and transport.
type StatusPeerKind struct {
	Class     string `json:"class"`
	Transport string `json:"transport"`
	Count     int    `json:"count"`
}

// StatusIroh is the node's iroh endpoint (spec/iroh.md).
type StatusIroh struct {
	// State is "up" (the helper serves), "starting" (it is being started
	// or restarted) or "off" (not started, or its helper could not start
	// and the supervisor gave up: Why says which).
	State string `json:"state"`
	// Why says why iroh is off; empty otherwise.
	Why string `json:"why,omitempty"`
	// EndpointID is the node's EndpointId, off or not.
	EndpointID string `json:"endpoint_id"`
	// Addrs are the direct socket addresses it serves at.
	Addrs []string `json:"addrs"`
	// RelayURL is the home relay in use, "" for none; Relays are the
	// relays the endpoint was given ([iroh] relays and those learnt from
	// anchors).
	RelayURL string   `json:"relay_url"`
	Relays   []string `json:"relays"`
	// Connections counts the open iroh connections by selected path:
	// direct, relay, none.
	Connections map[string]int `json:"connections"`
	// HelperRestarts counts the times the helper stopped and was started
	// again.
	HelperRestarts uint64 `json:"helper_restarts"`
}

// StatusShards is the node's part of the author shards.
type StatusShards struct {
	// Subscribed are the shards it receives live (own filters, clients,
	// durability); Durable those it holds for durability.
	Subscribed int   `json:"subscribed"`
	Durable    []int `json:"durable"`
	// Replication is R; BelowReplication the shards fewer than R storage
	// nodes hold in this node's placement; StorageNodes how many it
	// places over.
	Replication      int `json:"replication"`
	BelowReplication int `json:"below_replication"`
	StorageNodes     int `json:"storage_nodes"`
}

// StatusSync is how far a catch-up is (progress.Progress): for the mesh,
// events the node's sync sessions found missing here or at a peer; for a
// gateway, events its catch-up with the backend fetched or published;
// moved so far of an estimated total, at a rate, with an estimate of the
// time left.
type StatusSync struct {
	Active         bool      `json:"active"`
	Moved          int64     `json:"moved"`
	Pending        int64     `json:"pending"`
	Total          int64     `json:"estimated_total"`
	PerSecond      float64   `json:"per_second"`
	LeftSeconds    int64     `json:"left_seconds"`
	ElapsedSeconds int64     `json:"elapsed_seconds"`
	Started        time.Time `json:"started,omitzero"`
}

// StatusSyncOf is p as the status shows it.
func StatusSyncOf(p progress.Progress) StatusSync {
	return StatusSync{Active: p.Active, Moved: p.Moved, Pending: p.Pending, Total: p.Total,
		PerSecond: math.Round(p.Rate*10) / 10, LeftSeconds: int64(p.Left / time.Second),
		ElapsedSeconds: int64(p.Elapsed / time.Second), Started: p.Started}
}

// StatusGateway is a gateway's side of its status: the backend, and its
// catch-up with it by direction (to_mesh: fetched from the backend and
// stored here; to_backend: published to the backend).
type StatusGateway struct {
	Backend string                `json:"backend"`
	CatchUp map[string]StatusSync `json:"catch_up"`
}

// SetGatewayStatus makes the status carry a gateway's side, read from fn
// at each request. It must be called before the node serves.
func (n *Node) SetGatewayStatus(fn func() StatusGateway) { n.gatewayStatus = fn }

// StatusStorage is the event store's use of the disk.
//
// Bytes is "storage used" everywhere the node reports it (status,
// fleetmesh_store_bytes, the dashboard): the space the store's files take
// on disk, in allocated blocks, as storage_max_bytes counts it. FileBytes
// is the other figure, the sum of the files' lengths, which is smaller
// while files are sparse or preallocated.
type StatusStorage struct {
	Dir       string `json:"dir"`
	Bytes     int64  `json:"bytes"`
	MaxBytes  int64  `json:"max_bytes"`
	FileBytes int64  `json:"file_bytes"`
}

// StatusError is one logged warning or error.
type StatusError struct {
	Time    time.Time `json:"time"`
	Level   string    `json:"level"`
	Message string    `json:"message"`
	// Attrs are the record's attributes as text (of the latest record,
	// when Count > 1).
	Attrs map[string]string `json:"attrs,omitempty"`
	// Count is how many records of this level and message were logged
	// since the first of them the status still keeps; Time is the latest.
	Count int `json:"count"`
}

// errorRing is a slog.Handler that passes every record on to next and
// keeps the last few warnings and errors for the status.
type errorRing struct {
	next  slog.Handler
	attrs []slog.Attr
	ring  *ring
}

type ring struct {
	mu   sync.Mutex
	max  int
	errs []StatusError
}

// statusErrors bounds the errors the status keeps.
const statusErrors = 20

func newErrorRing(next slog.Handler) *errorRing {
	return &errorRing{next: next, ring: &ring{max: statusErrors}}
}

func (h *errorRing) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelWarn || h.next.Enabled(ctx, l)
}

func (h *errorRing) Handle(ctx context.Context, r slog.Record) error {
	if r.Level >= slog.LevelWarn {
		e := StatusError{Time: r.Time, Level: r.Level.String(), Message: r.Message, Attrs: map[string]string{}, Count: 1}
		add := func(a slog.Attr) bool {
			e.Attrs[a.Key] = a.Value.String()
			return true
		}
		for _, a := range h.attrs {
			add(a)
		}
		r.Attrs(add)
		h.ring.mu.Lock()
		// A repeat replaces its earlier entry, counted, so that one
		// failing dial does not push every other error out.
		if i := slices.IndexFunc(h.ring.errs, func(o StatusError) bool { return o.Level == e.Level && o.Message == e.Message }); i >= 0 {
			e.Count += h.ring.errs[i].Count
			h.ring.errs = slices.Delete(h.ring.errs, i, i+1)
		}
		h.ring.errs = append(h.ring.errs, e)
		if len(h.ring.errs) > h.ring.max {
			h.ring.errs = slices.Delete(h.ring.errs, 0, len(h.ring.errs)-h.ring.max)
		}
		h.ring.mu.Unlock()
	}
	if !h.next.Enabled(ctx, r.Level) {
		return nil
	}
	return h.next.Handle(ctx, r)
}

func (h *errorRing) WithAttrs(as []slog.Attr) slog.Handler {
	return &errorRing{next: h.next.WithAttrs(as), attrs: append(slices.Clone(h.attrs), as...), ring: h.ring}
}

func (h *errorRing) WithGroup(name string) slog.Handler {
	return &errorRing{next: h.next.WithGroup(name), attrs: h.attrs, ring: h.ring}
}

func (h *errorRing) recent() []StatusError {
	h.ring.mu.Lock()
	defer h.ring.mu.Unlock()
	return slices.Clone(h.ring.errs)
}

// status gathers the node's Status now.
func (n *Node) status() Status {
	mp := n.mesh
	if mp == nil {
		return n.frontEndStatus()
	}
	m := mp.m
	nat := m.NATStatus()
	st := Status{
		Version:      n.opts.Version,
		DID:          n.opts.Key.DID(),
		PeerID:       n.opts.Key.PeerID().String(),
		Class:        string(mp.self.class(nat)),
		ClassConfig:  n.opts.Config.Class,
		Reachability: strings.ToLower(nat.Reachability.String()),
		RelayService: nat.RelayService,
		Relays:       []string{},
		RelayURL:     n.RelayURL(),
		MeshAddrs:    mp.addrs(),
		PeerKinds:    []StatusPeerKind{},
		Errors:       n.errs.recent(),
		StartedAt:    n.started,
	}
	st.UptimeSeconds = int64(time.Since(n.started) / time.Second)
	for _, r := range nat.Relays {
		st.Relays = append(st.Relays, r.String())
	}
	for k, c := range m.PeerCounts() {
		st.Peers += c
		st.PeerKinds = append(st.PeerKinds, StatusPeerKind{Class: k.Class, Transport: k.Transport, Count: c})
	}
	slices.SortFunc(st.PeerKinds, func(a, b StatusPeerKind) int {
		return strings.Compare(a.Class+"/"+a.Transport, b.Class+"/"+b.Transport)
	})
	st.AddressBookPeers = m.AddrBookLen()
	st.Iroh = n.irohStatus()
	stats := m.Stats()
	st.Shards = StatusShards{
		Subscribed:   len(m.Subscribed()),
		Durable:      append([]int{}, stats.DurableShards...),
		StorageNodes: stats.StorageNodes,
	}
	st.Shards.BelowReplication, st.Shards.Replication = shardsBelowR(m.Placement())
	st.Storage = n.storageStatus()
	st.Sync = StatusSyncOf(mp.sync.Progress())
	st.MeshRole = true
	n.addFrontEnds(&st)
	if n.gatewayStatus != nil {
		gs := n.gatewayStatus()
		st.Gateway = &gs
	}
	return st
}

// storageStatus is the store's part of the status: its directory, or
// with PostgreSQL "postgres" and the database's size.
func (n *Node) storageStatus() StatusStorage {
	if n.fe != nil {
		return StatusStorage{Dir: "postgres", Bytes: int64(n.store.DiskBytes()), MaxBytes: int64(n.store.MaxBytes())}
	}
	dir := n.opts.Home.Path(n.opts.Config.Store.Dir)
	return StatusStorage{Dir: dir, Bytes: int64(n.store.DiskBytes()), MaxBytes: int64(n.store.MaxBytes()), FileBytes: dirBytes(dir)}
}

// frontEndStatus is the status of a front-end without the mesh role: its
// relay, its store and the front-ends.
func (n *Node) frontEndStatus() Status {
	st := Status{
		Version:      n.opts.Version,
		DID:          n.opts.Key.DID(),
		PeerID:       n.opts.Key.PeerID().String(),
		Class:        n.opts.Config.Class,
		ClassConfig:  n.opts.Config.Class,
		Reachability: "unknown",
		Relays:       []string{},
		RelayURL:     n.RelayURL(),
		MeshAddrs:    []string{},
		PeerKinds:    []StatusPeerKind{},
		Errors:       n.errs.recent(),
		StartedAt:    n.started,
		Iroh:         n.irohStatus(),
		Storage:      n.storageStatus(),
	}
	st.UptimeSeconds = int64(time.Since(n.started) / time.Second)
	n.addFrontEnds(&st)
	return st
}

// addFrontEnds lists the node's front-ends in st, with PostgreSQL.
func (n *Node) addFrontEnds(st *Status) {
	if n.fe == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	list, err := n.fe.list(ctx)
	if err != nil {
		st.Errors = append(st.Errors, StatusError{Time: time.Now(), Level: "ERROR", Message: err.Error(), Count: 1})
		return
	}
	st.FrontEnds = list
}

// irohStatus is the iroh part of the status.
func (n *Node) irohStatus() StatusIroh {
	st := StatusIroh{State: "off", Why: n.irohOff, EndpointID: n.opts.Key.EndpointID(), Addrs: []string{}, Relays: []string{},
		Connections: map[string]int{"direct": 0, "relay": 0, "none": 0}}
	if n.iroh == nil {
		return st
	}
	ep := n.iroh.ep
	info, up := ep.Info()
	st.State, st.Why = "starting", ""
	if err := ep.Failed(); err != nil {
		st.State, st.Why = "off", err.Error()
	}
	if up {
		st.State = "up"
		st.Addrs = append(st.Addrs, info.Addrs...)
		st.RelayURL = info.Relay
	}
	st.Relays = append(st.Relays, ep.Relays()...)
	for _, c := range ep.Conns() {
		st.Connections[c.Path]++
	}
	st.HelperRestarts = ep.Stats().Restarts
	return st
}

// dirBytes is the size of the regular files under dir, best effort.
func dirBytes(dir string) int64 {
	var total int64
	filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if d.Type().IsRegular() {
			if info, err := d.Info(); err == nil {
				total += info.Size()
			}
		}
		return nil
	})
	return total
}

// hasRunToken reports whether r carries the token of the node's RunFile.
func (n *Node) hasRunToken(r *http.Request) bool {
	got := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	return subtle.ConstantTimeCompare([]byte(got), []byte(n.statusToken)) == 1
}

func (n *Node) serveStatus(w http.ResponseWriter, r *http.Request) {
	if !n.hasRunToken(r) {
		http.Error(w, "the status needs the token in the node home's "+RunFile+" (fleetmesh status --home DIR reads it)", http.StatusUnauthorized)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(n.status())
}

// newStatusToken makes the random token that reads the status.
func newStatusToken() (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("node: status token: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

// writeRunFile writes RunFile for a node whose relay listens on addr.
func (n *Node) writeRunFile(addr net.Addr) error {
	host, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		return fmt.Errorf("node: %s: %w", RunFile, err)
	}
	// A wildcard listener is reached on loopback from the same machine.
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
		if ip.To4() == nil {
			host = "::1"
		}
	}
	info := runInfo{PID: os.Getpid(), URL: "http://" + net.JoinHostPort(host, port) + StatusPath, Token: n.statusToken}
	data, err := json.Marshal(info)
	if err != nil {
		return err
	}
	path := filepath.Join(n.opts.Home.Dir, RunFile)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(data, '\n'), 0o600); err != nil {
		return fmt.Errorf("node: write %s: %w", RunFile, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("node: write %s: %w", RunFile, err)
	}
	return nil
}

// removeRunFile removes RunFile if it is still this node's.
func (n *Node) removeRunFile() {
	path := filepath.Join(n.opts.Home.Dir, RunFile)
	data, err := os.ReadFile(path)
	if err != nil {
		return
	}
	var info runInfo
	if json.Unmarshal(data, &info) == nil && info.Token == n.statusToken {
		os.Remove(path)
	}
}

// readRunInfo reads a home's RunFile, and returns it with its path.
func readRunInfo(home Home) (runInfo, string, error) {
	path := filepath.Join(home.Dir, RunFile)
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return runInfo{}, path, fmt.Errorf("%w: %s does not exist (start the node with fleetmesh run --home %s)", ErrNotRunning, path, home.Dir)
	}
	if err != nil {
		return runInfo{}, path, err
	}
	var info runInfo
	if err := json.Unmarshal(data, &info); err != nil || info.URL == "" || info.Token == "" {
		return runInfo{}, path, fmt.Errorf("%s is not a node's run file (remove it and restart the node): %v", path, err)
	}
	return info, path, nil
}

// ErrNotRunning is returned by ReadStatus when no node answers for a
// home.
var ErrNotRunning = errors.New("no running node answers for this home")

// ReadStatus reads the Status of the node running in home, through the
// address and token in its RunFile.
func ReadStatus(ctx context.Context, home Home) (Status, error) {
	info, path, err := readRunInfo(home)
	if err != nil {
		return Status{}, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, info.URL, nil)
	if err != nil {
		return Status{}, fmt.Errorf("%s names %q: %w", path, info.URL, err)
	}
	req.Header.Set("Authorization", "Bearer "+info.Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return Status{}, fmt.Errorf("%w: the node of %s (pid %d) does not answer at %s: %v (a node killed without a clean shutdown leaves %s behind)", ErrNotRunning, home.Dir, info.PID, info.URL, err, RunFile)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return Status{}, err
	}
	if resp.StatusCode != http.StatusOK {
		return Status{}, fmt.Errorf("the node at %s answered %s: %s", info.URL, resp.Status, strings.TrimSpace(string(body)))
	}
	var st Status
	if err := json.Unmarshal(body, &st); err != nil {
		return Status{}, fmt.Errorf("the node at %s sent a status that is not JSON: %w", info.URL, err)
	}
	return st, nil
}
