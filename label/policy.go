package label

import (
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"fleetmesh.org/fleetmesh/nostr"
	"fleetmesh.org/fleetmesh/receipt"
	"fleetmesh.org/fleetmesh/standing"
)

// Rules a verdict names: what was labelled.
const (
	RuleAuthor = "author" // the event's author (p)
	RuleEvent  = "event"  // the event itself (e)
	RuleBlob   = "blob"   // a blob the event names by hash (x)
	RuleNode   = "node"   // a node (r), behind an unresolved dispute
)

// reporterPrefix names a listed Nostr reporter as a labeller.
const reporterPrefix = "nostr:"

// Options are what a Policy reads besides its Config.
type Options struct {
	// Self is this node's DID: its own labels weigh 1, the most
	// standing there is (its operator's own judgement).
	Self string
	// Standing is each labeller's standing here (a snapshot: it is read
	// on the relay's hot path). Nil: no labeller has any.
	Standing standing.Reader
	// Resolved reports whether this node holds a co-signed receipt of
	// the disputed receipt's pair and window: the dispute was resolved
	// after all. Nil: none is.
	Resolved func(disputed *receipt.Receipt) bool
	// Evict, if set, is told of a label the set evicted (to drop it from
	// the event store too).
	Evict func(id [32]byte)
	// Held, if set, is told of each event the policy holds for review
	// (policy hold) and why: the node puts it in the operator's NIP-86
	// moderation queue. It is called on the event path, outside the
	// policy's lock.
	Held func(ev *nostr.Event, why string)
	// Metrics, if not nil, count what the policy does.
	Metrics *Metrics
	// Now is the clock (nil: time.Now).
	Now func() time.Time
}

// Policy weighs the labels a node holds by their labellers' standing
// and applies the node's [labels] policy to events (spec/labels.md
// "Policy"). Its methods are safe for concurrent use.
type Policy struct {
	cfg       Config
	opts      Options
	set       *Set
	m         *Metrics
	reporters map[[32]byte]bool

	mu sync.Mutex
	// held lists events held for review under ActionHold, and refused
	// the events refused with their authors, for `fleetmesh why`; both
	// bounded by MaxHeld, the oldest leaving first.
	held, refused recent
}

// NewPolicy makes a node's policy over an empty set.
func NewPolicy(cfg Config, opts Options) (*Policy, error) {
	if err := cfg.Check(); err != nil {
		return nil, fmt.Errorf("labels.%w", err)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Metrics == nil {
		opts.Metrics = NewMetrics(nil)
	}
	p := &Policy{cfg: cfg, opts: opts, set: NewSet(cfg.MaxPerLabeller, cfg.MaxLabels), m: opts.Metrics,
		reporters: map[[32]byte]bool{}, held: newRecent(cfg.MaxHeld), refused: newRecent(cfg.MaxHeld)}
	for _, r := range cfg.Reporters {
		var pk [32]byte
		hex.Decode(pk[:], []byte(r))
		p.reporters[pk] = true
	}
	p.m.set.Store(p.set)
	return p, nil
}

// Config returns the policy's settings.
func (p *Policy) Config() Config { return p.cfg }

// Set is the labels the policy holds.
func (p *Policy) Set() *Set { return p.set }

// Weight is what labeller's labels weigh here: 1 for this node's own, its
// standing when at least MinStanding, a listed reporter's ReporterWeight,
// and 0 otherwise.
func (p *Policy) Weight(labeller string) float64 {
	if rest, ok := strings.CutPrefix(labeller, reporterPrefix); ok {
		var pk [32]byte
		if hex.Decode(pk[:], []byte(rest)); p.reporters[pk] {
			return p.cfg.ReporterWeight
		}
		return 0
	}
	if labeller == p.opts.Self && labeller != "" {
		return 1
	}
	if p.opts.Standing == nil {
		return 0
	}
	s := p.opts.Standing.Of(labeller)
	if s < p.cfg.MinStanding || s <= 0 {
		return 0
	}
	return s
}

// Admit is the relay's check of an event before it is stored
// (relay.RejectFunc's reason, "" to accept): a label of this namespace
// must verify and find room; a listed reporter's report must find room;
// any other event is judged by the labels on it, and refused with
// `blocked:` when the policy is refuse and they pass the threshold.
func (p *Policy) Admit(ev *nostr.Event) string {
	switch ev.Kind {
	case Kind:
		l, err := Parse(ev)
		switch {
		case errors.Is(err, ErrNotLabel):
			return "" // another namespace's label: an ordinary event
		case err != nil:
			p.m.received.WithLabelValues("invalid").Inc()
			return "invalid: " + strings.TrimPrefix(err.Error(), "label: ") + " (spec/labels.md)"
		}
		if p.set.Has(l.ID) {
			return ""
		}
		if err := p.set.Room(l.Labeller, p.Weight(l.Labeller) > 0); err != nil {
			p.m.received.WithLabelValues(refusedResult(err)).Inc()
			return "blocked: " + err.Error()
		}
		return ""
	case KindReport:
		if !p.reporters[ev.PubKey] {
			return "" // a report from a key not listed: stored, counts for nothing
		}
		if err := p.set.Room(reporterPrefix+ev.PubKeyHex(), true); err != nil {
			p.m.received.WithLabelValues(refusedResult(err)).Inc()
			return "blocked: " + err.Error()
		}
		return ""
	}
	v := p.Verdict(ev)
	if v == nil {
		return ""
	}
	p.m.verdicts.WithLabelValues(v.Rule, p.cfg.Policy).Inc()
	switch p.cfg.Policy {
	case ActionRefuse:
		p.m.refusals.WithLabelValues(v.Rule).Inc()
		p.mu.Lock()
		p.refused.add(ev.ID, ev.PubKey)
		p.mu.Unlock()
		return v.Message(ev.IDHex())
	case ActionHold:
		p.mu.Lock()
		p.held.add(ev.ID, ev.PubKey)
		p.mu.Unlock()
		if p.opts.Held != nil {
			p.opts.Held(ev, v.Reason())
		}
	}
	return ""
}

func refusedResult(err error) string {
	if errors.Is(err, ErrLabellerFull) {
		return "refused_labeller_full"
	}
	return "refused_full"
}

// Ingest takes in a stored event: a label of this namespace is kept, a
// NIP-09 deletion retracts the labels its author published, and a listed
// reporter's NIP-56 report is kept as labels. Anything else is ignored.
func (p *Policy) Ingest(ev *nostr.Event) {
	switch ev.Kind {
	case Kind:
		l, err := Parse(ev)
		if err != nil {
			if !errors.Is(err, ErrNotLabel) {
				p.m.received.WithLabelValues("invalid").Inc()
			}
			return
		}
		p.keep(l)
	case KindReport:
		if !p.reporters[ev.PubKey] {
			p.m.received.WithLabelValues("report_ignored").Inc()
			return
		}
		for _, l := range reportLabels(ev) {
			p.keep(l)
		}
	case nostr.KindDeletion:
		if n := p.set.Retract(ev.PubKey, Retracted(ev)); n > 0 {
			p.m.received.WithLabelValues("retracted").Add(float64(n))
		}
	}
}

func (p *Policy) keep(l *Label) {
	added, evicted, err := p.set.Add(l, p.Weight(l.Labeller) > 0)
	switch {
	case err != nil:
		// Admit found room, but another label took it meanwhile: the
		// store must not keep what the index does not.
		p.m.received.WithLabelValues(refusedResult(err)).Inc()
		if p.opts.Evict != nil && !strings.HasPrefix(l.Labeller, reporterPrefix) {
			p.opts.Evict(l.ID)
		}
	case !added:
		p.m.received.WithLabelValues("duplicate").Inc()
	default:
		p.m.received.WithLabelValues("kept").Inc()
	}
	if evicted != nil {
		p.m.received.WithLabelValues("evicted").Inc()
		if p.opts.Evict != nil {
			p.opts.Evict(*evicted)
		}
	}
}

// reportLabels reads a NIP-56 report as labels by its reporter: one on
// the event it names (`e`), else one on the author (`p`), with the
// report type as the reason (other when it names none we know).
func reportLabels(ev *nostr.Event) []*Label {
	var out []*Label
	add := func(k TargetKind, t []string) {
		if len(t) < 2 {
			return
		}
		r := Other
		if len(t) >= 3 {
			if x, err := ParseReason(t[2]); err == nil && x != Misbehaving {
				r = x
			}
		}
		tg := Target{k, t[1]}
		if tg.Check() != nil {
			return
		}
		exp, _ := ev.Expiration()
		note := ev.Content
		if len(note) > MaxNoteBytes {
			note = note[:MaxNoteBytes]
		}
		out = append(out, &Label{ID: ev.ID, Labeller: reporterPrefix + ev.PubKeyHex(), PubKey: ev.PubKey,
			Reason: r, Target: tg, Note: note, Created: ev.CreatedAt, Expires: exp})
	}
	if t := ev.Tags.Tag("e"); t != nil {
		add(Event, t)
	} else if t := ev.Tags.Tag("p"); t != nil {
		add(Author, t)
	}
	return out
}

// Verdict is what the labels on one target came to.
type Verdict struct {
	// Rule names what was labelled: author, event, blob or node.
	Rule   string `json:"rule"`
	Target string `json:"target"`
	// Sum is the labellers' weight here; Threshold the policy's.
	Sum       float64 `json:"sum"`
	Threshold float64 `json:"threshold"`
	// Reasons are the labels' reasons, most given first.
	Reasons []Reason `json:"reasons"`
	// Labels are the labels behind it and what each labeller weighs.
	Labels []Weighed `json:"labels"`
}

// Weighed is one label and its labeller's weight here.
type Weighed struct {
	ID       string  `json:"id"`
	Labeller string  `json:"labeller"`
	Weight   float64 `json:"weight"`
	Reason   Reason  `json:"reason"`
	Note     string  `json:"note,omitempty"`
	Created  int64   `json:"created_at"`
	Expires  int64   `json:"expires,omitempty"`
	Dispute  string  `json:"dispute,omitempty"`
	// Ignored says why the label weighs nothing, if it does not.
	Ignored string `json:"ignored,omitempty"`
}

// Passes reports whether the verdict is at or past its threshold.
func (v *Verdict) Passes() bool { return v != nil && v.Sum >= v.Threshold }

// Message is the `OK false` reason of a refusal of the event id.
func (v *Verdict) Message(id string) string {
	return fmt.Sprintf("blocked: %s (rule labels.%s; the operator can see why with `fleetmesh why --event %s`)", v.Reason(), v.Rule, id)
}

// Reason says what the verdict found in a line: what was labelled, how,
// by how many labellers, of what standing against the threshold.
func (v *Verdict) Reason() string {
	what := v.Rule
	if len(v.Reasons) > 0 {
		what += " labelled " + string(v.Reasons[0])
	}
	return fmt.Sprintf("%s by %d labeller(s) of standing %.4g here, at or past this relay's threshold %.4g", what, v.counted(), v.Sum, v.Threshold)
}

func (v *Verdict) counted() int {
	n := 0
	for _, w := range v.Labels {
		if w.Ignored == "" {
			n++
		}
	}
	return n
}

// Verdict returns the first of the event's targets (author, event, blobs
// it names by `x`) whose labels pass the threshold, or nil.
func (p *Policy) Verdict(ev *nostr.Event) *Verdict {
	now := p.opts.Now().Unix()
	// The keys are built in place: the hot path allocates nothing.
	var key [66]byte
	key[1] = ':'
	key[0] = 'p'
	hex.Encode(key[2:], ev.PubKey[:])
	if s := p.sum(key[:], now); s >= p.cfg.Threshold {
		return p.explain(RuleAuthor, Target{Author, string(key[2:])}, now)
	}
	key[0] = 'e'
	hex.Encode(key[2:], ev.ID[:])
	if s := p.sum(key[:], now); s >= p.cfg.Threshold {
		return p.explain(RuleEvent, Target{Event, string(key[2:])}, now)
	}
	key[0] = 'x'
	for _, t := range ev.Tags {
		if len(t) >= 2 && t[0] == "x" && len(t[1]) == 64 {
			copy(key[2:], t[1])
			if s := p.sum(key[:], now); s >= p.cfg.Threshold {
				return p.explain(RuleBlob, Target{Blob, t[1]}, now)
			}
		}
	}
	return nil
}

// sum is the weight of target's distinct labellers here (the hot path:
// one map read when nothing labels it).
func (p *Policy) sum(target []byte, now int64) float64 {
	var seen [8]string
	n, s := 0, 0.0
	var more map[string]bool
	p.set.each(target, now, func(l *Label) {
		for _, x := range seen[:n] {
			if x == l.Labeller {
				return
			}
		}
		if more[l.Labeller] {
			return
		}
		if n < len(seen) {
			seen[n] = l.Labeller
			n++
		} else {
			if more == nil {
				more = map[string]bool{}
			}
			more[l.Labeller] = true
		}
		if ok, _ := p.counts(l); ok {
			s += p.Weight(l.Labeller)
		}
	})
	return s
}

// counts reports whether l may weigh anything, and why not: a label about
// a node counts only with a dispute this node does not hold resolved.
func (p *Policy) counts(l *Label) (bool, string) {
	if l.Target.Kind != Node {
		return true, ""
	}
	if l.Dispute == nil {
		return false, "a label about a node with no dispute behind it"
	}
	if p.opts.Resolved != nil && p.opts.Resolved(l.Dispute) {
		return false, "its dispute was resolved: a co-signed receipt of that window is held here"
	}
	return true, ""
}

// explain builds the verdict on target with every label behind it.
func (p *Policy) explain(rule string, t Target, now int64) *Verdict {
	v := &Verdict{Rule: rule, Target: t.String(), Threshold: p.cfg.Threshold, Labels: []Weighed{}, Reasons: []Reason{}}
	seen := map[string]bool{}
	reasons := map[Reason]int{}
	for _, l := range p.set.On(t.String(), now) {
		w := Weighed{ID: l.IDHex(), Labeller: l.Labeller, Weight: p.Weight(l.Labeller), Reason: l.Reason,
			Note: l.Note, Created: l.Created, Expires: l.Expires, Dispute: l.DisputeCID()}
		ok, why := p.counts(l)
		switch {
		case !ok:
			w.Ignored = why
		case w.Weight == 0:
			w.Ignored = "the labeller has no standing here"
		case seen[l.Labeller]:
			w.Ignored = "the labeller's other label on it counts already"
		default:
			seen[l.Labeller] = true
			v.Sum += w.Weight
			reasons[l.Reason]++
		}
		v.Labels = append(v.Labels, w)
	}
	for r := range reasons {
		v.Reasons = append(v.Reasons, r)
	}
	sort.Slice(v.Reasons, func(i, j int) bool {
		a, b := v.Reasons[i], v.Reasons[j]
		return reasons[a] > reasons[b] || reasons[a] == reasons[b] && a < b
	})
	sort.SliceStable(v.Labels, func(i, j int) bool { return v.Labels[i].Weight > v.Labels[j].Weight })
	return v
}

// Explain returns the verdict on one target whether or not it passes:
// what `fleetmesh why` shows.
func (p *Policy) Explain(t Target) *Verdict {
	rule := map[TargetKind]string{Author: RuleAuthor, Event: RuleEvent, Blob: RuleBlob, Node: RuleNode}[t.Kind]
	return p.explain(rule, t, p.opts.Now().Unix())
}

// NodeVerdict is the verdict on a node's labels, or nil when they do not
// pass the threshold. Only labels with an unresolved dispute signed by
// their labeller count.
func (p *Policy) NodeVerdict(did string) *Verdict {
	now := p.opts.Now().Unix()
	if p.sum([]byte("r:"+did), now) < p.cfg.Threshold {
		return nil
	}
	return p.explain(RuleNode, Target{Node, did}, now)
}

// Standing is what the services read of a node's standing here once the
// labels have had their say: under hold or refuse, a node whose
// dispute-backed labels pass the threshold reads 0 (no preference, and
// its own labels weigh nothing); otherwise s, its standing.
func (p *Policy) Standing(did string, s float64) float64 {
	if s == 0 || p.cfg.Policy == ActionCount {
		return s
	}
	if p.NodeVerdict(did) != nil {
		return 0
	}
	return s
}

// Refused returns the author of an event this policy refused, if it is
// still remembered.
func (p *Policy) Refused(id [32]byte) (author [32]byte, ok bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.refused.get(id)
}

// Held returns the ids of the events held for review, oldest first.
func (p *Policy) Held() [][32]byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.held.order)
}

// Expire drops the labels expired by now and counts them.
func (p *Policy) Expire() int {
	n := p.set.Expire(p.opts.Now().Unix())
	if n > 0 {
		p.m.received.WithLabelValues("expired").Add(float64(n))
	}
	return n
}

// recent is a bounded memory of events and their authors, oldest leaving
// first.
type recent struct {
	max   int
	order [][32]byte
	by    map[[32]byte][32]byte
}

func newRecent(max int) recent { return recent{max: max, by: map[[32]byte][32]byte{}} }

func (r *recent) add(id, author [32]byte) {
	if r.max == 0 {
		return
	}
	if _, ok := r.by[id]; ok {
		return
	}
	if len(r.order) >= r.max {
		delete(r.by, r.order[0])
		r.order = r.order[1:]
	}
	r.order = append(r.order, id)
	r.by[id] = author
}

func (r *recent) get(id [32]byte) ([32]byte, bool) {
	a, ok := r.by[id]
	return a, ok
}
