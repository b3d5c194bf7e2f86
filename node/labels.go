package node

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"fleetmesh.org/fleetmesh/accounting"
	"fleetmesh.org/fleetmesh/identity"
	"fleetmesh.org/fleetmesh/internal/nostrkey"
	"fleetmesh.org/fleetmesh/internal/periodic"
	"fleetmesh.org/fleetmesh/label"
	"fleetmesh.org/fleetmesh/manage"
	"fleetmesh.org/fleetmesh/nostr"
	"fleetmesh.org/fleetmesh/receipt"
	"fleetmesh.org/fleetmesh/relay"
	"fleetmesh.org/fleetmesh/standing"
)

// LabelKeyFile is the label key's file name in a node home: the
// secp256k1 key that publishes the node's labels (spec/labels.md
// "Signatures").
const LabelKeyFile = "label.key"

// labelsPart is the node's shared threat intelligence (spec/labels.md):
// the policy on the relay's hook, the labels the store holds read back
// at start, every stored label, report and deletion taken in, expired
// labels swept, and the control socket's label and why requests.
type labelsPart struct {
	p    *label.Policy
	key  *identity.Key
	sk   nostr.SecretKey
	rl   *relay.Relay
	st   EventStore
	acct *accounting.Service
	log  *slog.Logger
	// held carries the events the policy holds to the operator's NIP-86
	// moderation queue, written off the event path (a disk write per
	// held event would let a flood of one labelled author's events
	// cost a write each); when full, an event is listed only in
	// `fleetmesh why --held`.
	held  chan heldEvent
	lists *manage.Lists

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// heldEvent is an event held for review and why.
type heldEvent struct {
	ev  *nostr.Event
	why string
}

// heldQueue bounds the held events waiting for the moderation queue's
// write.
const heldQueue = 256

// openLabels opens the policy on the relay. With the accounting (ap; a
// node, or the front-end holding the mesh role) it weighs labellers by
// the node's own standing view, feeds what labels make of nodes back into
// it and serves `fleetmesh label` and `fleetmesh why`. A front-end
// without the mesh role has no accounting (ap nil): it weighs them by
// shared, the view its holder shares, and knows of no dispute resolved.
func openLabels(opts Options, rl *relay.Relay, st EventStore, ap *accountingPart, shared standing.Reader, lists *manage.Lists, reg prometheus.Registerer) (*labelsPart, error) {
	sk, _, err := nostrkey.LoadOrCreate(opts.Home.Path(LabelKeyFile), "labels: label key")
	if err != nil {
		return nil, err
	}
	lp := &labelsPart{key: opts.Key, sk: sk, rl: rl, st: st, log: opts.Log, held: make(chan heldEvent, heldQueue), lists: lists}
	var resolved func(*receipt.Receipt) bool
	if ap != nil {
		lp.acct, shared, resolved = ap.s, rawReader{ap.standing}, ap.standing.resolved
	}
	lp.p, err = label.NewPolicy(opts.Config.Labels, label.Options{
		Self:     opts.Key.DID(),
		Standing: shared,
		Resolved: resolved,
		Evict:    lp.evict,
		Held: func(ev *nostr.Event, why string) {
			select {
			case lp.held <- heldEvent{ev, why}:
			default:
			}
		},
		Metrics: label.NewMetrics(reg),
	})
	if err != nil {
		return nil, err
	}
	hookLabels(rl, lp.p)
	if err := lp.load(); err != nil {
		return nil, err
	}
	if ap == nil {
		return lp, nil
	}
	adjust := lp.p.Standing
	ap.standing.adjust.Store(&adjust)
	ctl := ap.ctl.Handler.(*http.ServeMux)
	ctl.HandleFunc("POST /labels", lp.serveLabel)
	ctl.HandleFunc("POST /labels/retract", lp.serveRetract)
	ctl.HandleFunc("GET /labels/why", lp.serveWhy)
	return lp, nil
}

// hookLabels puts the policy on the relay: it judges every event before
// it is stored (a client's and the mesh's alike), and takes in every
// stored label, report and deletion.
func hookLabels(rl *relay.Relay, p *label.Policy) {
	rl.RejectEvent = append(rl.RejectEvent, func(_ context.Context, ev *nostr.Event) string { return p.Admit(ev) })
	rl.OnStored = append(rl.OnStored, func(ev *nostr.Event, _ relay.Origin) {
		switch ev.Kind {
		case label.Kind, label.KindReport, nostr.KindDeletion:
			p.Ingest(ev)
		}
	})
}

// load reads the labels and listed reports the store holds back into
// the index, newest first, up to its bound.
func (lp *labelsPart) load() error {
	n := lp.p.Config().MaxLabels
	f := &nostr.Filter{Kinds: []int{label.Kind, label.KindReport}}
	err := lp.st.Query(context.Background(), f, n, func(ev *nostr.Event) bool {
		lp.p.Ingest(ev)
		return true
	})
	if err != nil {
		return fmt.Errorf("node: reading labels: %w", err)
	}
	return nil
}

// evict drops a label the index evicted from the store too.
func (lp *labelsPart) evict(id [32]byte) {
	if _, err := lp.st.Delete(context.Background(), [][32]byte{id}); err != nil {
		lp.log.Warn("labels: dropping an evicted label", "id", hex.EncodeToString(id[:]), "err", err)
	}
}

func (lp *labelsPart) start() {
	ctx, cancel := context.WithCancel(context.Background())
	lp.cancel = cancel
	lp.wg.Add(1)
	go func() {
		defer lp.wg.Done()
		sweep := lp.p.Config().Sweep.Duration
		periodic.Run(ctx, sweep, sweep, nil, func() { lp.p.Expire() })
	}()
	lp.wg.Add(1)
	go func() {
		defer lp.wg.Done()
		for {
			select {
			case <-ctx.Done():
				return
			case h := <-lp.held:
				lp.queue(ctx, h)
			}
		}
	}()
}

// queue puts a held event in the NIP-86 moderation queue
// (listeventsneedingmoderation); allowevent releases it there.
func (lp *labelsPart) queue(ctx context.Context, h heldEvent) {
	js, err := h.ev.MarshalJSON()
	if err == nil {
		err = lp.lists.Hold(ctx, h.ev.ID, js, "labels: "+h.why)
	}
	switch {
	case errors.Is(err, manage.ErrFull):
		lp.log.Debug("labels: the moderation queue is full", "id", h.ev.IDHex())
	case err != nil:
		lp.log.Warn("labels: queueing a held event for moderation", "id", h.ev.IDHex(), "err", err)
	}
}

func (lp *labelsPart) close() {
	if lp.cancel != nil {
		lp.cancel()
		lp.wg.Wait()
	}
}

// LabelRequest is the control socket's POST /labels body: a label by
// this node (`fleetmesh label`). Exactly one of Author, Event, Blob and
// Node names the target.
type LabelRequest struct {
	Author string `json:"author,omitempty"`
	Event  string `json:"event,omitempty"`
	Blob   string `json:"blob,omitempty"`
	Node   string `json:"node,omitempty"`
	Reason string `json:"reason"`
	Note   string `json:"note,omitempty"`
	// Expires is the label's lifetime in seconds (0: none).
	Expires int64 `json:"expires,omitempty"`
	// Dispute is the CID of the disputed receipt behind a node label;
	// empty takes the newest this node holds with that node.
	Dispute string `json:"dispute,omitempty"`
}

// LabelAnswer is POST /labels' and /labels/retract's answer.
type LabelAnswer struct {
	ID string `json:"id"`
}

func (lp *labelsPart) serveLabel(w http.ResponseWriter, r *http.Request) {
	var req LabelRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 16<<10)).Decode(&req); err != nil {
		http.Error(w, "label: "+err.Error(), http.StatusBadRequest)
		return
	}
	var t label.Target
	n := 0
	for _, c := range []label.Target{{Kind: label.Author, Value: req.Author}, {Kind: label.Event, Value: req.Event}, {Kind: label.Blob, Value: req.Blob}, {Kind: label.Node, Value: req.Node}} {
		if c.Value != "" {
			t, n = c, n+1
		}
	}
	if n != 1 {
		http.Error(w, "label: name exactly one of --author, --event, --blob and --node", http.StatusBadRequest)
		return
	}
	reason, err := label.ParseReason(req.Reason)
	if err != nil {
		http.Error(w, "label: --"+err.Error(), http.StatusBadRequest)
		return
	}
	var dispute *receipt.Receipt
	if t.Kind == label.Node {
		if dispute, err = lp.dispute(t.Value, req.Dispute); err != nil {
			http.Error(w, "label: "+err.Error(), http.StatusBadRequest)
			return
		}
	}
	now := time.Now().Unix()
	exp := int64(0)
	if req.Expires > 0 {
		exp = now + req.Expires
	}
	ev, err := label.New(lp.key, lp.sk, reason, t, req.Note, now, exp, dispute)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	lp.publish(w, r.Context(), ev)
}

// dispute finds the disputed receipt this node recorded with node: the
// one of CID want, or the newest.
func (lp *labelsPart) dispute(node, want string) (*receipt.Receipt, error) {
	_, disputed, err := lp.acct.Records()
	if err != nil {
		return nil, err
	}
	var best *receipt.Receipt
	for _, d := range disputed {
		if !d.Has(node) || !d.Has(lp.key.DID()) {
			continue
		}
		if want != "" {
			if c, err := d.CID(); err == nil && c.String() == want {
				return d, nil
			}
			continue
		}
		if best == nil || d.WindowStart > best.WindowStart {
			best = d
		}
	}
	if want != "" {
		return nil, fmt.Errorf("--dispute %s: this node holds no disputed receipt of that CID with %s (see fleetmesh receipts --node %s)", want, node, node)
	}
	if best == nil {
		return nil, fmt.Errorf("--node %s: this node reported no window with it disputed, and a label about a node needs one (spec/labels.md)", node)
	}
	return best, nil
}

// publish stores ev through the relay, as a client's event (the mesh
// then replicates it), and answers its id.
func (lp *labelsPart) publish(w http.ResponseWriter, ctx context.Context, ev *nostr.Event) {
	if _, err := lp.rl.AddEvent(ctx, ev, relay.FromClient); err != nil {
		var refused *relay.RefusedError
		if errors.As(err, &refused) {
			http.Error(w, refused.Reason, http.StatusConflict)
			return
		}
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(LabelAnswer{ID: ev.IDHex()})
}

func (lp *labelsPart) serveRetract(w http.ResponseWriter, r *http.Request) {
	var req LabelAnswer
	var id [32]byte
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4<<10)).Decode(&req); err != nil || nostr.DecodeHex(id[:], req.ID) != nil {
		http.Error(w, "retract: give the label's id, 64 hex digits", http.StatusBadRequest)
		return
	}
	ev, err := label.Retract(lp.sk, time.Now().Unix(), id)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	lp.publish(w, r.Context(), ev)
}

// Why is GET /labels/why's answer: the verdicts on an event's author and
// the event itself (or on an author or node alone), with every label and
// labeller behind them (`fleetmesh why`).
type Why struct {
	Event  string `json:"event,omitempty"`
	Author string `json:"author,omitempty"`
	// Refused says whether this node refused the event for its labels
	// (while it is remembered: [labels] max_held).
	Refused   bool    `json:"refused"`
	Policy    string  `json:"policy"`
	Threshold float64 `json:"threshold"`
	// Verdicts are one per target asked about, passing or not.
	Verdicts []*label.Verdict `json:"verdicts"`
	// Held lists the events held for review under policy hold, oldest
	// first, when asked for (held=1).
	Held []string `json:"held,omitempty"`
}

func (lp *labelsPart) serveWhy(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	cfg := lp.p.Config()
	out := Why{Event: q.Get("event"), Author: q.Get("author"), Policy: cfg.Policy, Threshold: cfg.Threshold, Verdicts: []*label.Verdict{}}
	if out.Event != "" {
		var id [32]byte
		if nostr.DecodeHex(id[:], out.Event) != nil {
			http.Error(w, "why: --event: give an event id, 64 hex digits", http.StatusBadRequest)
			return
		}
		if a, ok := lp.p.Refused(id); ok {
			out.Refused = true
			if out.Author == "" {
				out.Author = hex.EncodeToString(a[:])
			}
		} else if out.Author == "" {
			lp.st.Query(r.Context(), &nostr.Filter{IDs: [][32]byte{id}}, 1, func(ev *nostr.Event) bool {
				out.Author = ev.PubKeyHex()
				return false
			})
		}
	}
	if q.Get("held") == "1" {
		out.Held = []string{}
		for _, id := range lp.p.Held() {
			out.Held = append(out.Held, hex.EncodeToString(id[:]))
		}
	}
	for _, t := range []label.Target{{Kind: label.Author, Value: out.Author}, {Kind: label.Event, Value: out.Event}, {Kind: label.Node, Value: q.Get("node")}} {
		if t.Value == "" {
			continue
		}
		if err := t.Check(); err != nil {
			http.Error(w, "why: "+err.Error(), http.StatusBadRequest)
			return
		}
		out.Verdicts = append(out.Verdicts, lp.p.Explain(t))
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(out)
}
