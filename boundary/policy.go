package boundary

import (
	"context"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"fleetmesh.org/fleetmesh/nostr"
)

// Direction names where a check happens, for counting and logs.
type Direction string

// Directions.
const (
	ToMesh       Direction = "to_mesh"       // backend → mesh at a gateway
	ToBackend    Direction = "to_backend"    // mesh → backend at a gateway
	ReplicateOut Direction = "replicate_out" // this node → other nodes
	ReplicateIn  Direction = "replicate_in"  // other nodes → this node
	// Replicate is GossipSub propagation, where one validator sees events
	// both published and forwarded.
	Replicate   Direction = "replicate"
	ClientStore Direction = "client_store" // a client publishing to this node
)

// Policy is a compiled rule set with its counters.
type Policy struct {
	rules   []Rule
	refused *prometheus.CounterVec
	log     *slog.Logger
}

// New compiles the default rules plus extra ones from configuration.
// Metrics go to reg (nil: not registered).
func New(extra []RuleSpec, log *slog.Logger, reg prometheus.Registerer) (*Policy, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	p := &Policy{
		rules: []Rule{keyMaterialRule},
		log:   log,
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fleetmesh_boundary_refusals_total",
			Help: "Events the boundary policy refused, by rule, class and direction.",
		}, []string{"rule", "class", "direction"}),
	}
	for _, s := range append(DefaultSpecs(), extra...) {
		r, err := s.Compile()
		if err != nil {
			return nil, err
		}
		p.rules = append(p.rules, r)
	}
	if reg != nil {
		if err := reg.Register(p.refused); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// Rules lists the policy's rules in the order they are checked.
func (p *Policy) Rules() []Rule { return p.rules }

// Match returns the first rule that refuses ev, or nil if it may cross.
func (p *Policy) Match(ev *nostr.Event) *Rule {
	for i := range p.rules {
		if p.rules[i].match(ev) {
			return &p.rules[i]
		}
	}
	return nil
}

// Allow checks ev for a crossing in direction d, counting and logging a
// refusal. It returns the refusing rule, or nil.
func (p *Policy) Allow(ev *nostr.Event, d Direction) *Rule {
	r := p.Match(ev)
	if r == nil {
		return nil
	}
	p.refused.WithLabelValues(r.Name, string(r.Class), string(d)).Inc()
	p.log.Info("boundary refused event", "rule", r.Name, "class", r.Class, "direction", d, "id", ev.IDHex(), "kind", ev.Kind, "reason", r.Reason)
	return r
}

// RelayHook is the relay's RejectEvent policy: events of a class that may
// not be stored at all are refused with "blocked:" and the rule's reason;
// ephemeral events pass, to be delivered only to local clients.
func (p *Policy) RelayHook(_ context.Context, ev *nostr.Event) string {
	r := p.Match(ev)
	if r == nil || r.Class.Stored() {
		return ""
	}
	p.Allow(ev, ClientStore)
	return r.Refusal()
}

// Refusal is the NIP-01 OK or CLOSED reason for an event r refuses:
// "blocked:", r's reason and r's name.
func (r *Rule) Refusal() string {
	return "blocked: " + r.Reason + " (fleetmesh boundary rule " + r.Name + ")"
}

// Count returns how many refusals the policy has counted for a rule and
// direction; for tests and the conformance suite.
func (p *Policy) Count(rule string, d Direction) float64 {
	var total float64
	for _, r := range p.rules {
		if r.Name != rule {
			continue
		}
		c, err := p.refused.GetMetricWithLabelValues(r.Name, string(r.Class), string(d))
		if err != nil {
			return 0
		}
		total += counterValue(c)
	}
	return total
}
