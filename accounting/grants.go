package accounting

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/libp2p/go-libp2p/core/peer"
	bolt "go.etcd.io/bbolt"

	"fleetmesh.org/fleetmesh/didcomm"
	"fleetmesh.org/fleetmesh/grant"
	"fleetmesh.org/fleetmesh/identity"
	"fleetmesh.org/fleetmesh/meter"
)

const grantPIURI = grant.PIURI

// Grant states as `fleetmesh grants list` shows them.
const (
	StateOffered  = "offered"
	StateActive   = "active"
	StateDeclined = "declined"
	StateRevoked  = "revoked"
	StateExpired  = "expired"
)

// grantRecord is a grant as this node keeps it.
type grantRecord struct {
	Grant     *grant.Grant `json:"grant"`
	Declined  string       `json:"declined,omitempty"`
	RevokedAt int64        `json:"revoked_at,omitempty"`
}

// GrantInfo is one grant with its state now.
type GrantInfo struct {
	*grant.Grant
	State     string `json:"state"`
	Direction string `json:"direction"` // "given" or "received"
	RevokedAt int64  `json:"revoked_at,omitempty"`
	Declined  string `json:"declined,omitempty"`
}

func (g grantRecord) state(now time.Time) string {
	switch {
	case g.Declined != "":
		return StateDeclined
	case g.RevokedAt != 0 && now.Unix() >= g.RevokedAt:
		return StateRevoked
	case now.Unix() >= g.Grant.End:
		return StateExpired
	case g.Grant.SigGrantee == nil:
		return StateOffered
	}
	return StateActive
}

// grantKey is a grant's key in the grants bucket: its grantor, then its
// id. A grant is found only under the DID that signed it as grantor, so
// no message from another DID (its grantee above all) can reach, change or
// erase it (spec/grants.md "Keeping grants").
func grantKey(grantor, id string) []byte { return []byte(grantor + "\x00" + id) }

// putGrant stores a grant record and updates the index of grants given.
func (s *Service) putGrant(g grantRecord) error {
	isNew := false
	err := s.db.b.Update(func(tx *bolt.Tx) error {
		k := grantKey(g.Grant.Grantor, g.Grant.ID)
		isNew = tx.Bucket(bGrants).Get(k) == nil
		return putJSON(tx, bGrants, k, g)
	})
	if err != nil {
		return err
	}
	s.grantsMu.Lock()
	defer s.grantsMu.Unlock()
	if g.Grant.Grantor != s.did {
		if isNew {
			s.received++
		}
		return nil
	}
	p, err := identity.PeerIDFromDID(g.Grant.Grantee)
	if err != nil {
		return nil
	}
	gs := slices.DeleteFunc(slices.Clone(s.given[p]), func(o grantRecord) bool { return o.Grant.ID == g.Grant.ID })
	if g.Declined == "" && g.Grant.SigGrantee != nil {
		gs = append(gs, g)
	}
	if len(gs) == 0 {
		delete(s.given, p)
	} else {
		s.given[p] = gs
	}
	return nil
}

// loadGrants rekeys grants kept by id alone (before grantKey) and builds
// the index of grants this node gave and the count of those it received.
func (s *Service) loadGrants() error {
	given := map[peer.ID][]grantRecord{}
	received := 0
	err := s.db.b.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bGrants)
		type kv struct{ k, v []byte }
		var old []kv
		if err := b.ForEach(func(k, v []byte) error {
			var g grantRecord
			if err := json.Unmarshal(v, &g); err != nil {
				return err
			}
			if !bytes.Contains(k, []byte{0}) {
				old = append(old, kv{bytes.Clone(k), bytes.Clone(v)})
			}
			if g.Grant.Grantor != s.did {
				received++
				return nil
			}
			if g.Declined != "" || g.Grant.SigGrantee == nil {
				return nil
			}
			if p, err := identity.PeerIDFromDID(g.Grant.Grantee); err == nil {
				given[p] = append(given[p], g)
			}
			return nil
		}); err != nil {
			return err
		}
		for _, o := range old {
			var g grantRecord
			json.Unmarshal(o.v, &g)
			if err := b.Delete(o.k); err != nil {
				return err
			}
			if err := b.Put(grantKey(g.Grant.Grantor, g.Grant.ID), o.v); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("accounting: grants: %w", err)
	}
	s.grantsMu.Lock()
	s.given, s.received = given, received
	s.grantsMu.Unlock()
	return nil
}

// keepReceived stores a grant given to this node if there is room for
// one more grant from its grantor within MaxGrantsPerPeer and MaxGrants,
// dropping grants that have ended (declined, revoked or expired: no
// longer in force, and of no receipt's history) to make it; it reports
// whether it stored the grant. The check and the store are one
// transaction, and writers are serialised, so concurrent offers cannot
// pass a bound together.
func (s *Service) keepReceived(g *grant.Grant) (bool, error) {
	grantor := g.Grantor
	now := s.now()
	ended := func(v []byte) bool {
		var g grantRecord
		return json.Unmarshal(v, &g) == nil && g.state(now) != StateActive && g.state(now) != StateOffered
	}
	dropped := 0
	room := false
	err := s.db.b.Update(func(tx *bolt.Tx) (err error) {
		// Counted before the transaction ends: the next writer's check
		// sees this one's count.
		defer func() {
			if err == nil {
				s.grantsMu.Lock()
				s.received -= dropped
				if room {
					s.received++
				}
				s.grantsMu.Unlock()
			}
		}()
		b := tx.Bucket(bGrants)
		pfx := append([]byte(grantor), 0)
		var mine, gone [][]byte
		c := b.Cursor()
		for k, v := c.Seek(pfx); k != nil && bytes.HasPrefix(k, pfx); k, v = c.Next() {
			mine = append(mine, bytes.Clone(k))
			if ended(v) {
				gone = append(gone, bytes.Clone(k))
			}
		}
		if len(mine) >= s.cfg.MaxGrantsPerPeer {
			for _, k := range gone {
				if err := b.Delete(k); err != nil {
					return err
				}
			}
			dropped = len(gone)
			if len(mine)-len(gone) >= s.cfg.MaxGrantsPerPeer {
				return nil
			}
		}
		s.grantsMu.RLock()
		total := s.received - dropped
		s.grantsMu.RUnlock()
		if total >= s.cfg.MaxGrants {
			// At the total bound: drop the ended grants of every grantor
			// (at most MaxGrants of them are read).
			pfx := append([]byte(s.did), 0)
			var gone [][]byte
			b.ForEach(func(k, v []byte) error {
				if !bytes.HasPrefix(k, pfx) && ended(v) {
					gone = append(gone, bytes.Clone(k))
				}
				return nil
			})
			for _, k := range gone {
				if err := b.Delete(k); err != nil {
					return err
				}
			}
			dropped += len(gone)
			if total-len(gone) >= s.cfg.MaxGrants {
				return nil
			}
		}
		if err := putJSON(tx, bGrants, grantKey(g.Grantor, g.ID), grantRecord{Grant: g}); err != nil {
			return err
		}
		room = true
		return nil
	})
	return room, err
}

// Grants lists every grant this node gave or received, with its state.
func (s *Service) Grants() ([]GrantInfo, error) {
	now := s.now()
	var out []GrantInfo
	err := s.db.b.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bGrants).ForEach(func(_, v []byte) error {
			var g grantRecord
			if err := json.Unmarshal(v, &g); err != nil {
				return err
			}
			dir := "received"
			if g.Grant.Grantor == s.did {
				dir = "given"
			}
			out = append(out, GrantInfo{Grant: g.Grant, State: g.state(now), Direction: dir, RevokedAt: g.RevokedAt, Declined: g.Declined})
			return nil
		})
	})
	return out, err
}

// Offer offers grantee a grant of quota units of svc per window for
// length, revocable with notice, and waits for the answer.
func (s *Service) Offer(ctx context.Context, grantee string, svc meter.Service, quota uint64, length, notice time.Duration) (GrantInfo, error) {
	if _, err := identity.PublicKeyFromDID(grantee); err != nil {
		return GrantInfo{}, fmt.Errorf("grantee %q: %w", grantee, err)
	}
	g := grant.New(s.did, grantee, svc, quota, s.cfg.Window.Duration, s.now(), length, notice)
	if err := g.Sign(s.key); err != nil {
		return GrantInfo{}, err
	}
	raw, err := g.Encode()
	if err != nil {
		return GrantInfo{}, err
	}
	if err := s.putGrant(grantRecord{Grant: g}); err != nil {
		return GrantInfo{}, err
	}
	m, err := didcomm.NewMessage(grant.TypeOffer, grant.OfferBody{Grant: raw})
	if err != nil {
		return GrantInfo{}, err
	}
	reply, err := s.agent.Request(ctx, grantee, m)
	if err != nil {
		return GrantInfo{}, fmt.Errorf("offer %s to %s: %w (kept as offered)", g.ID, grantee, err)
	}
	rec := grantRecord{Grant: g}
	switch reply.Type {
	case grant.TypeAccept:
		var b grant.AcceptBody
		if err := json.Unmarshal(reply.Body, &b); err != nil {
			return GrantInfo{}, err
		}
		got, err := grant.Decode(b.Grant)
		if err != nil {
			return GrantInfo{}, err
		}
		if err := got.Check(true); err != nil {
			return GrantInfo{}, err
		}
		cp := *got
		cp.SigGrantee, g.SigGrantee = nil, nil
		a, _ := cp.Encode()
		if string(a) != string(raw) {
			return GrantInfo{}, fmt.Errorf("grantee accepted a different grant than offered")
		}
		rec.Grant = got
	case grant.TypeDecline:
		var b grant.DeclineBody
		json.Unmarshal(reply.Body, &b)
		rec.Declined = "declined by grantee: " + b.Reason
	default:
		return GrantInfo{}, fmt.Errorf("unexpected answer %s to an offer", reply.Type)
	}
	if err := s.putGrant(rec); err != nil {
		return GrantInfo{}, err
	}
	return GrantInfo{Grant: rec.Grant, State: rec.state(s.now()), Direction: "given", Declined: rec.Declined}, nil
}

// Revoke revokes a grant this node gave, effective after the grant's
// notice, and tells the grantee.
func (s *Service) Revoke(ctx context.Context, id string) (GrantInfo, error) {
	var rec grantRecord
	err := s.db.b.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(bGrants).Get(grantKey(s.did, id))
		if v == nil {
			return fmt.Errorf("no grant %s given by this node (see `fleetmesh grants list`)", id)
		}
		return json.Unmarshal(v, &rec)
	})
	if err != nil {
		return GrantInfo{}, err
	}
	if rec.Grant.Grantor != s.did {
		return GrantInfo{}, fmt.Errorf("grant %s was given by %s; only its grantor revokes it", id, rec.Grant.Grantor)
	}
	if rec.RevokedAt == 0 {
		rec.RevokedAt = s.now().Unix() + rec.Grant.NoticeSecs
		if err := s.putGrant(rec); err != nil {
			return GrantInfo{}, err
		}
	}
	m, _ := didcomm.NewMessage(grant.TypeRevoke, grant.RevokeBody{ID: id, EffectiveAt: rec.RevokedAt})
	info := GrantInfo{Grant: rec.Grant, State: rec.state(s.now()), Direction: "given", RevokedAt: rec.RevokedAt}
	if _, err := s.agent.Request(ctx, rec.Grant.Grantee, m); err != nil && !isNoAnswer(err) {
		return info, fmt.Errorf("revoked here from %d; telling %s failed: %w", rec.RevokedAt, rec.Grant.Grantee, err)
	}
	return info, nil
}

// handleGrant serves grant/1.0 as grantee.
func (s *Service) handleGrant(_ context.Context, u *didcomm.Unpacked) (*didcomm.Message, error) {
	msg := u.Message
	if !u.Authenticated {
		return nil, problem(didcomm.CodeUnauthorized, "grant messages must be authcrypted")
	}
	switch msg.Type {
	case grant.TypeOffer:
		var b grant.OfferBody
		if err := json.Unmarshal(msg.Body, &b); err != nil {
			return nil, problem(didcomm.CodeMalformed, "offer body: %v", err)
		}
		g, err := grant.Decode(b.Grant)
		if err != nil {
			return nil, problem(didcomm.CodeMalformed, "%v", err)
		}
		if g.Grantor != msg.From || g.Grantee != s.did {
			return nil, problem(didcomm.CodeUnauthorized, "grant %s is from %s to %s, offered by %s to %s", g.ID, g.Grantor, g.Grantee, msg.From, s.did)
		}
		if !s.cfg.AcceptGrants {
			out, _ := didcomm.NewMessage(grant.TypeDecline, grant.DeclineBody{ID: g.ID, Reason: "this node accepts no grants ([accounting] accept_grants = false)"})
			out.Thid = msg.ID
			return out, nil
		}
		decline := func(reason string) (*didcomm.Message, error) {
			out, _ := didcomm.NewMessage(grant.TypeDecline, grant.DeclineBody{ID: g.ID, Reason: reason})
			out.Thid = msg.ID
			return out, nil
		}
		var held *grantRecord
		if err := s.db.b.View(func(tx *bolt.Tx) error {
			if v := tx.Bucket(bGrants).Get(grantKey(g.Grantor, g.ID)); v != nil {
				held = new(grantRecord)
				return json.Unmarshal(v, held)
			}
			return nil
		}); err != nil {
			return nil, err
		}
		if held != nil {
			// An id is one grant: an offer again of the grant held is
			// answered as before (its revocation stands); another grant
			// under its id changes nothing.
			cp, offered := *held.Grant, *g
			cp.SigGrantee, offered.SigGrantee = nil, nil
			a, _ := cp.Encode()
			o, _ := offered.Encode()
			if string(a) != string(o) {
				return decline(fmt.Sprintf("grant id %s is taken by another grant of yours: offer a new id", g.ID))
			}
			if held.Declined != "" {
				return decline(held.Declined)
			}
			raw, _ := held.Grant.Encode()
			out, _ := didcomm.NewMessage(grant.TypeAccept, grant.AcceptBody{Grant: raw})
			out.Thid = msg.ID
			return out, nil
		}
		if err := g.Sign(s.key); err != nil {
			return nil, err
		}
		if room, err := s.keepReceived(g); err != nil {
			return nil, err
		} else if !room {
			return decline(fmt.Sprintf("this node keeps at most %d grants from one grantor and %d in all (max_grants_per_peer, max_grants)", s.cfg.MaxGrantsPerPeer, s.cfg.MaxGrants))
		}
		raw, _ := g.Encode()
		out, _ := didcomm.NewMessage(grant.TypeAccept, grant.AcceptBody{Grant: raw})
		out.Thid = msg.ID
		return out, nil
	case grant.TypeRevoke:
		var b grant.RevokeBody
		if err := json.Unmarshal(msg.Body, &b); err != nil {
			return nil, problem(didcomm.CodeMalformed, "revoke body: %v", err)
		}
		var rec grantRecord
		err := s.db.b.View(func(tx *bolt.Tx) error {
			// Only the grantor's own grants are found under its DID.
			v := tx.Bucket(bGrants).Get(grantKey(msg.From, b.ID))
			if v == nil {
				return problem(didcomm.CodeUnauthorized, "no grant %s from %s here: only a grant's grantor revokes it", b.ID, msg.From)
			}
			return json.Unmarshal(v, &rec)
		})
		if err != nil {
			return nil, err
		}
		if rec.Grant.Grantor != msg.From || rec.Grant.Grantee != s.did {
			return nil, problem(didcomm.CodeUnauthorized, "only grant %s's grantor revokes it", b.ID)
		}
		if rec.RevokedAt != 0 {
			return nil, nil // revoked already: the first notice stands
		}
		// The grantor may not cut the grant's notice short.
		rec.RevokedAt = max(b.EffectiveAt, s.now().Unix()+rec.Grant.NoticeSecs-5)
		return nil, s.putGrant(rec)
	}
	return nil, problem(didcomm.CodeUnsupportedType, "grant/1.0 has no message %s", msg.Type)
}

// Allow is the enforcement hook for a service this node gives p: nil if p
// holds an active grant of svc with room for n more units this window, or
// if the service needs no grant here; otherwise an error whose text is the
// NIP-01 style refusal naming the grant. Each refusal is counted.
func (s *Service) Allow(p peer.ID, svc meter.Service, n uint64) error {
	used := s.meter.Used(p, svc)
	return s.allow(p, svc, used+n, func(g *grant.Grant) string {
		return fmt.Sprintf("%d %s per %ds window, %d used", g.Quota, svc, g.WindowSecs, used)
	})
}

// AllowQueue is the mediator's check before it queues a forward for leaf,
// which has queued messages waiting: a grant of mediation_messages bounds
// the leaf's queue (the DESIGN's "mediation queue size"), so the forward
// is refused once the queue holds the grant's quota.
func (s *Service) AllowQueue(leaf string, queued int) error {
	p, err := identity.PeerIDFromDID(leaf)
	if err != nil {
		return nil
	}
	return s.allow(p, meter.MediationMessages, uint64(queued)+1, func(g *grant.Grant) string {
		return fmt.Sprintf("a queue of %d mediation_messages, %d queued", g.Quota, queued)
	})
}

// allow refuses p's use of svc when would (the units in use once served)
// exceeds every active grant's quota, or when svc needs a grant and p
// holds none; terms describes the grant exceeded.
func (s *Service) allow(p peer.ID, svc meter.Service, would uint64, terms func(*grant.Grant) string) error {
	now := s.now()
	s.grantsMu.RLock()
	gs := s.given[p]
	s.grantsMu.RUnlock()
	var over *grant.Grant
	for i := range gs {
		g := gs[i]
		if g.Grant.Service != svc.String() || g.state(now) != StateActive {
			continue
		}
		if would <= g.Grant.Quota {
			return nil
		}
		over = gs[i].Grant
	}
	if over != nil {
		s.m.grantRefusals.WithLabelValues(svc.String(), "over_quota").Inc()
		return fmt.Errorf("rate-limited: over grant %s (%s)", over.ID, terms(over))
	}
	if slices.Contains(s.cfg.RequireGrant, svc) {
		s.m.grantRefusals.WithLabelValues(svc.String(), "no_grant").Inc()
		return fmt.Errorf("restricted: this node gives %s only under a grant (none active for you; ask with %s)", svc, grant.TypeOffer)
	}
	return nil
}
