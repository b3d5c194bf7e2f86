package meshsync

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/libp2p/go-libp2p/core/host"
	"github.com/libp2p/go-libp2p/core/peer"
	"github.com/libp2p/go-libp2p/core/protocol"
	"github.com/libp2p/go-msgio"

	"fleetmesh.org/fleetmesh/boundary"
	"fleetmesh.org/fleetmesh/eventstore"
	"fleetmesh.org/fleetmesh/internal/progress"
	"fleetmesh.org/fleetmesh/mesh"
	"fleetmesh.org/fleetmesh/meter"
	"fleetmesh.org/fleetmesh/negentropy"
	"fleetmesh.org/fleetmesh/nostr"
	"fleetmesh.org/fleetmesh/receipt"
	"fleetmesh.org/fleetmesh/workbudget"
)

// Local is the node's own event store as this package needs it. AddEvent
// verifies, stores durably and delivers to the node's live subscribers.
type Local interface {
	Query(ctx context.Context, f *nostr.Filter, limit int, fn func(*nostr.Event) bool) error
	AddEvent(ctx context.Context, ev *nostr.Event) (eventstore.Result, error)
	// Delete removes stored events by id, all of one call or none, and
	// returns how many it removed; it is given at most 500 ids a call.
	// It is the hand-off of shards the node no longer keeps (handoff.go).
	Delete(ctx context.Context, ids [][32]byte) (int, error)
}

// Config bounds a session. Zero values take the defaults.
type Config struct {
	// MaxRecords is the largest set one session reconciles (default 500,000).
	MaxRecords int
	// FrameSizeLimit caps negentropy messages (default 60,000 bytes).
	FrameSizeLimit int
	// SessionTimeout bounds a whole session (default 5 minutes).
	SessionTimeout time.Duration
	// Meter counts the events (and their bytes) fetched, pushed and
	// served, per peer, and the storage bytes of durable sessions; nil
	// counts nothing.
	Meter *meter.Meter
	// Allow, if set, is asked before this node gives a peer n units of a
	// service: each event (and its bytes) a REQ returns, each event a
	// peer pushes in a durable session (storage bytes), and once with n
	// 0 before a REQ is served at all. An error refuses with its text, a
	// NIP-01 prefixed reason naming the grant (spec/grants.md): CLOSED
	// for a REQ, a false OK for a pushed event.
	Allow func(p peer.ID, s meter.Service, n uint64) error
	// PeerMillisPerSecond and PeerRowsPerSecond are each peer's work
	// budget for the NEG-OPENs and REQs it sends (budgets.go; defaults
	// DefaultPeerMillisPerSecond and DefaultPeerRowsPerSecond).
	PeerMillisPerSecond int
	PeerRowsPerSecond   int
	// Penalize, if set, is told of a peer that broke the protocol: a
	// frame that is not a JSON array of a known message, a malformed
	// NEG-OPEN, REQ or EVENT, a negentropy message that does not parse.
	// The node scores the peer down (mesh.Mesh.Penalize).
	Penalize func(p peer.ID)
	// Receipts, if set, answers RECEIPTS: one page of a node's
	// accounting receipts and reports held here (spec/mesh-sync.md
	// "Receipts and reports"); nil refuses them.
	Receipts func(node, after string) (receipt.Page, error)
	// LookupGrace is the least a lookup waits for the peers it asked once
	// one of them has answered ([mesh] lookup_grace, default
	// DefaultLookupGrace); it waits as long again as that answer took if
	// that is longer. A peer not answering by then is left out of lookups
	// for a while (lookupsilence.go).
	LookupGrace time.Duration
	// Unanswered, if set, is told of a peer that did not answer a lookup
	// (the node reports it to the mesh's liveness, which probes a storage
	// node that is no longer connected).
	Unanswered func(p peer.ID)
}

// DefaultLookupGrace is Config.LookupGrace's default.
const DefaultLookupGrace = 250 * time.Millisecond

func (c *Config) fill() {
	if c.MaxRecords <= 0 {
		c.MaxRecords = 500_000
	}
	if c.FrameSizeLimit <= 0 {
		c.FrameSizeLimit = 60_000
	}
	if c.SessionTimeout <= 0 {
		c.SessionTimeout = 5 * time.Minute
	}
	if c.PeerMillisPerSecond <= 0 {
		c.PeerMillisPerSecond = DefaultPeerMillisPerSecond
	}
	if c.PeerRowsPerSecond <= 0 {
		c.PeerRowsPerSecond = DefaultPeerRowsPerSecond
	}
	if c.LookupGrace <= 0 {
		c.LookupGrace = DefaultLookupGrace
	}
}

// maxIDsPerReq bounds the ids one REQ asks for, so a frame of ids stays
// small (500 × 67 bytes of hex and quotes).
const maxIDsPerReq = 500

// Stats describes one session from the initiator's side.
type Stats struct {
	Rounds  int // negentropy round trips
	Have    int // ids this side had that the peer lacked
	Need    int // ids the peer had that this side lacked
	Fetched int // events fetched and stored (or already present)
	Pushed  int // events the peer accepted
	Refused int // events the boundary policy or the peer refused
}

// Service answers sync sessions on a libp2p host and starts them.
type Service struct {
	h      host.Host
	local  Local
	policy *boundary.Policy
	cfg    Config
	log    *slog.Logger
	dial   Dialer
	stats  counters
	work   *peerBudgets
	// progress is the current catch-up, over every session's fetches and
	// pushes.
	progress *progress.Tracker
	// handOffs are the shards this node accepts hand-offs of (handoff.go).
	handOffs handOffs
	// silence are the peers left out of lookups for not answering one
	// (lookupsilence.go).
	silence silence
}

// New registers the sync protocol on h.
func New(h host.Host, local Local, policy *boundary.Policy, cfg Config, log *slog.Logger) *Service {
	cfg.fill()
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Service{h: h, local: local, policy: policy, cfg: cfg, log: log, progress: progress.New("meshsync", log, true)}
	s.work = newPeerBudgets(&s.cfg)
	h.SetStreamHandler(protocol.ID(ProtocolID), s.serve)
	return s
}

// Progress returns how far the current catch-up is, or how the last one
// went when none runs: the ids the service's sessions found missing here
// (fetched from the peer) or at the peer (pushed to it). A new node
// catches up by both: by its own sessions' fetches, and by its peers'
// sessions, which push and show in their progress. Two co-holders missing
// the same id from one node count it twice, and the second transfer finds
// it stored already.
func (s *Service) Progress() progress.Progress { return s.progress.Get() }

// Close unregisters the protocol.
func (s *Service) Close() { s.h.RemoveStreamHandler(protocol.ID(ProtocolID)) }

// rawLocal is the optional part of a Local that lists stored records
// without decoding them, in no particular order, in one pass for the
// whole store (store.Store does).
type rawLocal interface {
	ListRaw(ctx context.Context, f *nostr.Filter, limit int, fn func(eventstore.Raw) bool) error
}

// items loads the (created_at, id) pairs of the events matching f that may
// be replicated at all; others are left out so that the peer is never told
// of an event it could not fetch. It also says how many records it read.
// When no boundary rule needs the whole event, only the pair (and the
// author, for shards) is read from each record.
func (s *Service) items(ctx context.Context, f *nostr.Filter, shards shardSet) ([]negentropy.Item, int, error) {
	var items []negentropy.Item
	limit := s.cfg.MaxRecords + 1
	if shards != nil {
		// The store cannot select by shard: scan the filter and count
		// only the shards' events against the bound (the store's own scan
		// bound still applies).
		limit = maxShardScan
	}
	read := 0
	keep := func(id [32]byte, createdAt int64) bool {
		items = append(items, negentropy.Item{Timestamp: uint64(createdAt), ID: id})
		return len(items) <= s.cfg.MaxRecords
	}
	var err error
	if rq, ok := s.local.(rawLocal); ok && (s.policy == nil || len(s.policy.Rules()) == 0) {
		err = rq.ListRaw(ctx, f, limit, func(r eventstore.Raw) bool {
			read++
			if shards != nil && !shards[mesh.ShardOf(r.PubKey())] {
				return true
			}
			return keep(r.ID(), r.CreatedAt())
		})
	} else {
		err = s.local.Query(ctx, f, limit, func(ev *nostr.Event) bool {
			read++
			if !inShards(shards, ev) || (s.policy != nil && s.policy.Match(ev) != nil) {
				return true
			}
			return keep(ev.ID, ev.CreatedAt)
		})
	}
	if err != nil {
		return nil, read, err
	}
	if len(items) > s.cfg.MaxRecords {
		return nil, read, fmt.Errorf("blocked: the filter matches more than %d events", s.cfg.MaxRecords)
	}
	return items, read, nil
}

func (s *Service) allowed(ev *nostr.Event, d boundary.Direction) bool {
	return s.policy == nil || s.policy.Allow(ev, d) == nil
}

// SyncWith reconciles this node's events matching f with peer p, fetches
// what it lacks and pushes what the peer lacks.
func (s *Service) SyncWith(ctx context.Context, p peer.ID, f nostr.Filter) (Stats, error) {
	return s.sync(ctx, p, &session{f: f})
}

// session is what one session reconciles (a filter, and the shard option
// when set is not nil) and whether it is a hand-off (handoff.go). A
// hand-off fetches nothing, and sync fills in what the peer took.
type session struct {
	f       nostr.Filter
	set     shardSet
	shards  []int // set as given, for the wire
	handOff bool

	// Filled in for a hand-off: items is this side's set, have the ids
	// the peer lacked, took those of them the peer holds now or refused
	// as obsolete there (tookPush).
	items []negentropy.Item
	have  []negentropy.ID
	took  map[[32]byte]bool
}

// maxShardScan bounds the events a shard-restricted session reads from
// the store; the store's own scan bound is lower by default.
const maxShardScan = 1 << 30

// sync runs one session.
func (s *Service) sync(ctx context.Context, p peer.ID, ses *session) (st Stats, err error) {
	defer func() {
		s.stats.record(st, err)
		if err == nil {
			s.silence.answered(p)
		}
	}()
	ctx, cancel := context.WithTimeout(ctx, s.cfg.SessionTimeout)
	defer cancel()
	str, done, err := s.openBound(ctx, p)
	if err != nil {
		return st, err
	}
	defer done()
	r, w := msgio.NewVarintReaderSize(str, MaxFrameBytes), msgio.NewVarintWriter(str)

	items, _, err := s.items(ctx, &ses.f, ses.set)
	if err != nil {
		return st, fmt.Errorf("meshsync: %w", err)
	}
	if ses.handOff {
		ses.items = items
	}
	vec, err := negentropy.NewVector(items)
	if err != nil {
		return st, err
	}
	in, err := negentropy.NewInitiator(vec, negentropy.Config{FrameSizeLimit: s.cfg.FrameSizeLimit, MaxRecords: s.cfg.MaxRecords})
	if err != nil {
		return st, err
	}
	msg, err := in.Initiate()
	if err != nil {
		return st, err
	}
	open := []any{"NEG-OPEN", "sync", ses.f, hex.EncodeToString(msg)}
	if ses.set != nil {
		open = append(open, openOptions{Shards: ses.shards, HandOff: ses.handOff})
	}
	if err := writeFrame(w, open...); err != nil {
		return st, err
	}
	var have, need []negentropy.ID
	for {
		typ, parts, err := readFrame(r)
		if err != nil {
			return st, fmt.Errorf("meshsync: %s: %w", p, err)
		}
		if typ == "NEG-ERR" && len(parts) >= 3 {
			return st, fmt.Errorf("meshsync: %s refused: %s", p, rawString(parts[2]))
		}
		if typ != "NEG-MSG" || len(parts) < 3 {
			return st, fmt.Errorf("meshsync: %s sent %s during reconciliation", p, typ)
		}
		raw, err := hex.DecodeString(rawString(parts[2]))
		if err != nil {
			return st, fmt.Errorf("meshsync: %s sent a NEG-MSG that is not hex", p)
		}
		step, err := in.Reconcile(raw)
		st.Rounds++
		if err != nil {
			return st, fmt.Errorf("meshsync: %s: %w", p, err)
		}
		have = append(have, step.Have...)
		need = append(need, step.Need...)
		if step.Done() {
			break
		}
		if err := writeFrame(w, "NEG-MSG", "sync", hex.EncodeToString(step.Next)); err != nil {
			return st, err
		}
	}
	if err := writeFrame(w, "NEG-CLOSE", "sync"); err != nil {
		return st, err
	}
	st.Have, st.Need = len(have), len(need)
	// Whatever the session does not move is given up when it ends, so that
	// a failed session leaves nothing pending in the catch-up.
	left := len(need) + len(have)
	s.progress.Found(left)
	defer func() { s.progress.Resolved(left) }()
	moved := func(n int) { s.progress.Resolved(n); left -= n }
	// Fetch first: a deletion the peer has removes events we would
	// otherwise push to it. A hand-off fetches nothing: this node is
	// about to stop keeping the set, and a deletion the peer holds
	// answers the push with "blocked: deleted".
	durable := ses.set != nil
	if ses.handOff {
		ses.have, ses.took = have, map[[32]byte]bool{}
		moved(len(need))
	} else if err := s.fetch(ctx, p, r, w, need, durable, &st, moved); err != nil {
		return st, err
	}
	if err := s.push(ctx, p, r, w, have, durable, &st, moved, ses.took); err != nil {
		return st, err
	}
	return st, nil
}

// fetch asks p for the events need names, in chunks, and stores them; it
// reports each chunk done to moved. In a durable session (spec/receipts.md
// "Counts") what it stores is storage this node gives p.
func (s *Service) fetch(ctx context.Context, p peer.ID, r msgio.Reader, w msgio.Writer, need []negentropy.ID, durable bool, st *Stats, moved func(int)) error {
	for len(need) > 0 {
		chunk := need[:min(len(need), maxIDsPerReq)]
		need = need[len(chunk):]
		ids := make([]string, len(chunk))
		for i, id := range chunk {
			ids[i] = hex.EncodeToString(id[:])
		}
		if err := writeFrame(w, "REQ", "fetch", map[string]any{"ids": ids}); err != nil {
			return err
		}
		var got []*nostr.Event
		for {
			typ, parts, err := readFrame(r)
			if err != nil {
				return fmt.Errorf("meshsync: fetch: %w", err)
			}
			if typ == "EOSE" {
				break
			}
			if typ == "CLOSED" && len(parts) >= 3 {
				s.store(ctx, got, st)
				return fmt.Errorf("meshsync: %s refused the fetch: %s", p, rawString(parts[2]))
			}
			if typ != "EVENT" || len(parts) < 3 {
				return fmt.Errorf("meshsync: fetch: unexpected %s", typ)
			}
			s.count(p, meter.Received, parts[2])
			if durable {
				s.stored(p, meter.Gave, len(parts[2]))
			}
			ev := new(nostr.Event)
			if err := json.Unmarshal(parts[2], ev); err != nil || !s.allowed(ev, boundary.ReplicateIn) {
				st.Refused++
				continue
			}
			got = append(got, ev)
		}
		s.store(ctx, got, st)
		moved(len(chunk))
	}
	return nil
}

// storeParallel is how many fetched events are handed to the store at
// once, so its batching writer commits them with few fsyncs.
const storeParallel = 64

// store adds fetched events concurrently and counts the outcomes.
func (s *Service) store(ctx context.Context, evs []*nostr.Event, st *Stats) {
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, storeParallel)
	for _, ev := range evs {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			res, err := s.local.AddEvent(ctx, ev)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				st.Refused++
				s.log.Info("meshsync: fetched event refused", "id", ev.IDHex(), "err", err)
			case res == eventstore.Stored || res == eventstore.Duplicate:
				st.Fetched++
			}
		}()
	}
	wg.Wait()
}

// push sends p the events have names, in chunks; it reports each chunk
// done to moved, and records in took (unless nil) the ids p took. In a
// durable session what p stores is storage p gives this node.
func (s *Service) push(ctx context.Context, p peer.ID, r msgio.Reader, w msgio.Writer, have []negentropy.ID, durable bool, st *Stats, moved func(int), took map[[32]byte]bool) error {
	for len(have) > 0 {
		chunk := have[:min(len(have), maxIDsPerReq)]
		have = have[len(chunk):]
		f := nostr.Filter{IDs: make([][32]byte, len(chunk))}
		for i, id := range chunk {
			f.IDs[i] = id
		}
		var evs []*nostr.Event
		if err := s.local.Query(ctx, &f, len(chunk), func(ev *nostr.Event) bool {
			if s.allowed(ev, boundary.ReplicateOut) {
				evs = append(evs, ev)
			} else {
				st.Refused++
			}
			return true
		}); err != nil {
			return err
		}
		// Write and read at once: the peer answers each EVENT with an OK
		// while more EVENTs are still coming, and a stream's buffers are
		// small, so writing them all before reading would deadlock.
		wrote := make(chan error, 1)
		frames := make([][]byte, len(evs))
		for i, ev := range evs {
			frames[i] = append(append([]byte(`["EVENT",`), ev.AppendJSON(nil)...), ']')
		}
		go func() {
			for _, frame := range frames {
				if err := writeRaw(w, frame); err != nil {
					wrote <- err
					return
				}
				s.count(p, meter.Gave, frame[len(`["EVENT",`):len(frame)-1])
			}
			wrote <- nil
		}()
		for i := range evs {
			typ, parts, err := readFrame(r)
			if err != nil {
				return fmt.Errorf("meshsync: push: %w", err)
			}
			if typ != "OK" || len(parts) < 3 {
				return fmt.Errorf("meshsync: push: unexpected %s", typ)
			}
			var ok bool
			json.Unmarshal(parts[2], &ok)
			if ok {
				st.Pushed++
				if durable {
					s.stored(p, meter.Received, len(frames[i])-len(`["EVENT",]`))
				}
			} else {
				st.Refused++
			}
			if took != nil && tookPush(ok, parts) {
				var id [32]byte
				if nostr.DecodeHex(id[:], rawString(parts[1])) == nil {
					took[id] = true
				}
			}
		}
		if err := <-wrote; err != nil {
			return err
		}
		moved(len(chunk))
	}
	return nil
}

// count meters one event (its JSON js) sent to or received from p.
func (s *Service) count(p peer.ID, d meter.Direction, js []byte) {
	s.cfg.Meter.Event(p, d, js)
}

// stored meters n bytes of events one side of a durable session took in
// for durability from the other (spec/receipts.md "Counts"): storage the
// taker gives (d Gave: this node took them from p) and the other receives.
// A fetched event counts as it arrives (the side it came from cannot see
// whether it was kept); a pushed one once its OK says it was kept.
func (s *Service) stored(p peer.ID, d meter.Direction, n int) {
	s.cfg.Meter.Record(p, meter.StorageBytes, d, uint64(n))
}

// allow asks the grant check (Config.Allow) whether this node may give p
// n units of svc.
func (s *Service) allow(p peer.ID, svc meter.Service, n uint64) error {
	if s.cfg.Allow == nil {
		return nil
	}
	return s.cfg.Allow(p, svc, n)
}

func rawString(r json.RawMessage) string {
	var s string
	json.Unmarshal(r, &s)
	return s
}

// serveOn answers one session as the responder. A peer that breaks the
// protocol is told so where the protocol has a way (NEG-ERR, CLOSED, OK
// false, NOTICE) and penalised (Config.Penalize); a frame that cannot be
// read at all ends the session.
func (s *Service) serveOn(str Stream, remote peer.ID) {
	defer str.Close()
	// A peer that opens a session is answering again.
	s.silence.answered(remote)
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.SessionTimeout)
	defer cancel()
	str.SetDeadline(time.Now().Add(s.cfg.SessionTimeout))
	r, w := msgio.NewVarintReaderSize(str, MaxFrameBytes), msgio.NewVarintWriter(str)
	violation := func() {
		if s.cfg.Penalize != nil {
			s.cfg.Penalize(remote)
		}
	}
	var resp *negentropy.Responder
	// durable is set by a NEG-OPEN with shards: the session is durable
	// placement's anti-entropy, whose transfers are storage too.
	durable := false
	for {
		typ, parts, err := readFrame(r)
		if err != nil {
			if errors.Is(err, errMalformed) || errors.Is(err, msgio.ErrMsgTooLarge) {
				violation()
			}
			if !errors.Is(err, io.EOF) {
				s.log.Debug("meshsync: session ended", "peer", remote, "err", err)
			}
			return
		}
		var werr error
		switch typ {
		case "NEG-OPEN":
			var f nostr.Filter
			if len(parts) < 4 || len(parts) > 5 || json.Unmarshal(parts[2], &f) != nil {
				violation()
				werr = writeFrame(w, "NEG-ERR", "sync", "invalid: NEG-OPEN needs a subscription id, a filter, a message and optionally options")
				break
			}
			var shards shardSet
			durable = false
			if len(parts) == 5 {
				var o openOptions
				if shards, o, err = parseOpenOptions(parts[4]); err != nil {
					violation()
					werr = writeFrame(w, "NEG-ERR", "sync", err.Error())
					break
				}
				if o.HandOff {
					if err := s.handOffs.accept(o.Shards); err != nil {
						werr = writeFrame(w, "NEG-ERR", "sync", err.Error())
						break
					}
				}
			}
			resp, werr = s.negOpen(ctx, remote, w, &f, shards, parts[3], violation)
			durable = resp != nil && shards != nil
		case "NEG-MSG":
			if resp == nil || len(parts) < 3 {
				violation()
				werr = writeFrame(w, "NEG-ERR", "sync", "closed: send NEG-OPEN first")
				break
			}
			werr = s.negStep(w, resp, parts[2], violation)
		case "NEG-CLOSE":
			resp = nil
		case "REQ":
			werr = s.serveReq(ctx, remote, w, parts, durable, violation)
		case "EVENT":
			werr = s.serveEvent(ctx, remote, w, parts, durable, violation)
		case "RECEIPTS":
			werr = s.serveReceipts(w, parts, violation)
		default:
			violation()
			werr = writeFrame(w, "NOTICE", "invalid: unknown message type "+typ)
		}
		if werr != nil {
			return
		}
	}
}

// negOpen answers a NEG-OPEN: it reserves the listing's largest cost
// from the peer's budget, lists the items, settles, and takes the first
// step. It returns the session's responder (nil if refused).
func (s *Service) negOpen(ctx context.Context, p peer.ID, w msgio.Writer, f *nostr.Filter, shards shardSet, msg json.RawMessage, violation func()) (*negentropy.Responder, error) {
	reserve, reason := s.work.admit(ctx, p, workbudget.Work{Rows: s.cfg.MaxRecords + 1})
	if reason != "" {
		return nil, writeFrame(w, "NEG-ERR", "sync", reason)
	}
	start := time.Now()
	items, read, err := s.items(ctx, f, shards)
	s.work.settle(p, reserve, workbudget.Work{Time: time.Since(start), Rows: read})
	if err != nil {
		return nil, writeFrame(w, "NEG-ERR", "sync", err.Error())
	}
	vec, err := negentropy.NewVector(items)
	var resp *negentropy.Responder
	if err == nil {
		resp, err = negentropy.NewResponder(vec, negentropy.Config{FrameSizeLimit: s.cfg.FrameSizeLimit, MaxRecords: s.cfg.MaxRecords})
	}
	if err != nil {
		return nil, writeFrame(w, "NEG-ERR", "sync", "error: "+err.Error())
	}
	return resp, s.negStep(w, resp, msg, violation)
}

func (s *Service) negStep(w msgio.Writer, resp *negentropy.Responder, hexMsg json.RawMessage, violation func()) error {
	raw, err := hex.DecodeString(rawString(hexMsg))
	if err != nil {
		violation()
		return writeFrame(w, "NEG-ERR", "sync", "invalid: negentropy message is not hex")
	}
	out, err := resp.Reconcile(raw)
	if err != nil {
		if errors.Is(err, negentropy.ErrMalformed) {
			violation()
		}
		return writeFrame(w, "NEG-ERR", "sync", "invalid: "+err.Error())
	}
	return writeFrame(w, "NEG-MSG", "sync", hex.EncodeToString(out))
}

// maxLookupLimit bounds how many events one lookup REQ returns.
const maxLookupLimit = 500

// serveReq answers a REQ for events by id (a fetch) or by any filter (a
// lookup from a node whose client asked for events it does not hold).
// Each event it returns is asked of the grant check first, events and
// bytes: a peer over its grant gets the events within it, then CLOSED
// naming the grant.
func (s *Service) serveReq(ctx context.Context, p peer.ID, w msgio.Writer, parts []json.RawMessage, durable bool, violation func()) error {
	var sub string
	var f nostr.Filter
	if len(parts) != 3 || json.Unmarshal(parts[1], &sub) != nil || json.Unmarshal(parts[2], &f) != nil || len(f.IDs) > maxIDsPerReq {
		violation()
		return writeFrame(w, "CLOSED", sub, fmt.Sprintf("invalid: a sync REQ has one filter and at most %d ids", maxIDsPerReq))
	}
	if err := s.allow(p, meter.Events, 0); err != nil {
		return writeFrame(w, "CLOSED", sub, err.Error())
	}
	if _, reason := s.work.admit(ctx, p, workbudget.Work{}); reason != "" {
		return writeFrame(w, "CLOSED", sub, reason)
	}
	start, read := time.Now(), 0
	defer func() { s.work.settle(p, workbudget.Work{}, workbudget.Work{Time: time.Since(start), Rows: read}) }()
	limit := maxLookupLimit
	if f.IDs != nil {
		limit = len(f.IDs)
	} else if f.HasLimit {
		limit = min(f.Limit, maxLookupLimit)
	}
	var werr, refused error
	err := s.local.Query(ctx, &f, limit, func(ev *nostr.Event) bool {
		read++
		if !s.allowed(ev, boundary.ReplicateOut) {
			return true
		}
		js := ev.AppendJSON(nil)
		if refused = s.allow(p, meter.Events, 1); refused == nil {
			refused = s.allow(p, meter.Bytes, uint64(len(js)))
		}
		if refused != nil {
			return false
		}
		frame := append(append(append(append([]byte(`["EVENT",`), mustJSON(sub)...), ','), js...), ']')
		werr = writeRaw(w, frame)
		s.count(p, meter.Gave, js)
		if durable {
			s.stored(p, meter.Received, len(js))
		}
		return werr == nil
	})
	if werr != nil {
		return werr
	}
	if refused != nil {
		return writeFrame(w, "CLOSED", sub, refused.Error())
	}
	if err != nil {
		return writeFrame(w, "CLOSED", sub, "error: could not read events")
	}
	return writeFrame(w, "EOSE", sub)
}

// serveEvent stores an event p pushes. In a durable session storing it is
// storage given to p, so the grant check is asked first.
func (s *Service) serveEvent(ctx context.Context, p peer.ID, w msgio.Writer, parts []json.RawMessage, durable bool, violation func()) error {
	ev := new(nostr.Event)
	if len(parts) != 2 {
		violation()
		return writeFrame(w, "NOTICE", "invalid: EVENT needs one event")
	}
	s.count(p, meter.Received, parts[1])
	if err := json.Unmarshal(parts[1], ev); err != nil {
		violation()
		return writeFrame(w, "OK", "", false, "invalid: "+err.Error())
	}
	id := ev.IDHex()
	if durable {
		if err := s.allow(p, meter.StorageBytes, uint64(len(parts[1]))); err != nil {
			return writeFrame(w, "OK", id, false, err.Error())
		}
	}
	kept := func() {
		if durable {
			s.stored(p, meter.Gave, len(parts[1]))
		}
	}
	if r := s.policy; r != nil {
		if rule := r.Allow(ev, boundary.ReplicateIn); rule != nil {
			return writeFrame(w, "OK", id, false, rule.Refusal())
		}
	}
	res, err := s.local.AddEvent(ctx, ev)
	switch {
	case err != nil:
		return writeFrame(w, "OK", id, false, "invalid: "+err.Error())
	case res == eventstore.Stored:
		kept()
		return writeFrame(w, "OK", id, true, "")
	case res == eventstore.Duplicate:
		kept()
		return writeFrame(w, "OK", id, true, "duplicate: already have this event")
	default:
		return writeFrame(w, "OK", id, false, "blocked: "+res.String())
	}
}

func mustJSON(s string) []byte {
	b, _ := json.Marshal(s)
	return b
}
