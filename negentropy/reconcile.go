package negentropy

import (
	"errors"
	"fmt"
)

// Limits and defaults of the reconciler.
const (
	// MinFrameSizeLimit is the smallest non-zero Config.FrameSizeLimit, as in
	// the reference implementation: every first range of a reply must fit.
	MinFrameSizeLimit = 4096
	// frameSizeMargin is kept free under the limit while ranges are added,
	// so that the closing ranges always fit (the reference's 200 bytes).
	frameSizeMargin = 200
	// DefaultMaxRecords is Config.MaxRecords when left zero.
	DefaultMaxRecords = 2_000_000
	// DefaultMaxDifferences is Config.MaxDifferences when left zero.
	DefaultMaxDifferences = 1_000_000
	// buckets is how many Fingerprint sub-ranges a differing range is split
	// into; ranges of fewer than 2*buckets items are sent as an IdList (the
	// reference's choice, which keeps a million items to about three round
	// trips).
	buckets = 16
)

// Config bounds one side of a reconciliation.
type Config struct {
	// FrameSizeLimit caps the size in bytes of every message this side
	// sends after the initial one: 0 means no limit, otherwise it must be at
	// least MinFrameSizeLimit. A limit costs more round trips, never
	// correctness.
	FrameSizeLimit int
	// MaxRecords is the largest storage this side reconciles; a larger one
	// fails with ErrTooManyRecords. 0 means DefaultMaxRecords.
	MaxRecords int
	// MaxDifferences bounds the have+need ids an initiator collects (and the
	// set it keeps to report each id once); past it Reconcile fails with
	// ErrTooManyDifferences. 0 means DefaultMaxDifferences.
	MaxDifferences int
}

func (c Config) withDefaults(s Storage) (Config, error) {
	if c.FrameSizeLimit != 0 && c.FrameSizeLimit < MinFrameSizeLimit {
		return c, fmt.Errorf("%w: frame size limit %d is below %d", ErrConfig, c.FrameSizeLimit, MinFrameSizeLimit)
	}
	if c.FrameSizeLimit < 0 || c.MaxRecords < 0 || c.MaxDifferences < 0 {
		return c, fmt.Errorf("%w: negative limit", ErrConfig)
	}
	if c.MaxRecords == 0 {
		c.MaxRecords = DefaultMaxRecords
	}
	if c.MaxDifferences == 0 {
		c.MaxDifferences = DefaultMaxDifferences
	}
	if n := s.Size(); n > c.MaxRecords {
		return c, fmt.Errorf("%w: %d items, at most %d", ErrTooManyRecords, n, c.MaxRecords)
	}
	return c, nil
}

// Initiator is the side that opens a reconciliation and learns the
// differences (the NIP-77 client). It is not safe for concurrent use.
type Initiator struct {
	r        reconciler
	started  bool
	done     bool
	reported map[ID]struct{}
}

// NewInitiator prepares an initiator over s.
func NewInitiator(s Storage, cfg Config) (*Initiator, error) {
	cfg, err := cfg.withDefaults(s)
	if err != nil {
		return nil, err
	}
	return &Initiator{r: reconciler{storage: s, cfg: cfg, initiator: true}}, nil
}

// Initiate returns the first message, covering the whole universe.
func (in *Initiator) Initiate() ([]byte, error) {
	if in.started {
		return nil, fmt.Errorf("%w: Initiate called twice", ErrState)
	}
	in.started = true
	e := newEncoder()
	if err := in.r.splitRange(&e, 0, in.r.storage.Size(), infinityBound); err != nil {
		return nil, err
	}
	return e.buf, nil
}

// Step is what one responder message taught the initiator.
type Step struct {
	// Next is the message to send to the responder; nil when the
	// reconciliation is complete.
	Next []byte
	// Have lists ids the initiator has and the responder lacks, found in
	// this step. Each id is reported once per reconciliation.
	Have []ID
	// Need lists ids the responder has and the initiator lacks, found in
	// this step. Each id is reported once per reconciliation.
	Need []ID
}

// Done reports whether the reconciliation is complete.
func (s Step) Done() bool { return s.Next == nil }

// Reconcile processes a message from the responder.
func (in *Initiator) Reconcile(msg []byte) (Step, error) {
	if !in.started || in.done {
		return Step{}, fmt.Errorf("%w: Reconcile before Initiate or after completion", ErrState)
	}
	m, err := DecodeMessage(msg)
	if err != nil {
		return Step{}, err
	}
	var st Step
	report := func(list *[]ID, id ID) error {
		if _, dup := in.reported[id]; dup {
			return nil
		}
		if len(in.reported) >= in.r.cfg.MaxDifferences {
			return fmt.Errorf("%w: more than %d", ErrTooManyDifferences, in.r.cfg.MaxDifferences)
		}
		if in.reported == nil {
			in.reported = make(map[ID]struct{})
		}
		in.reported[id] = struct{}{}
		*list = append(*list, id)
		return nil
	}
	out, err := in.r.reconcile(m,
		func(id ID) error { return report(&st.Have, id) },
		func(id ID) error { return report(&st.Need, id) })
	if err != nil {
		return Step{}, err
	}
	if len(out) > 1 {
		st.Next = out
	} else {
		in.done = true
	}
	return st, nil
}

// Responder is the side that answers (the NIP-77 relay). It learns nothing
// itself: every message it returns must go back to the initiator. It is not
// safe for concurrent use.
type Responder struct {
	r reconciler
}

// NewResponder prepares a responder over s.
func NewResponder(s Storage, cfg Config) (*Responder, error) {
	cfg, err := cfg.withDefaults(s)
	if err != nil {
		return nil, err
	}
	return &Responder{r: reconciler{storage: s, cfg: cfg}}, nil
}

// Reconcile answers one initiator message. A message of another protocol
// version (0x60..0x6f) is answered with the single byte 0x61, as the spec
// asks, so that the initiator can downgrade.
func (rs *Responder) Reconcile(msg []byte) ([]byte, error) {
	m, err := DecodeMessage(msg)
	if errors.Is(err, ErrUnsupportedVersion) {
		return []byte{ProtocolVersion}, nil
	}
	if err != nil {
		return nil, err
	}
	return rs.r.reconcile(m, nil, nil)
}

// reconciler is the algorithm both roles share: walk the peer's ranges in
// order against our storage and build the reply.
type reconciler struct {
	storage   Storage
	cfg       Config
	initiator bool
}

func (r *reconciler) overFrame(n int) bool {
	return r.cfg.FrameSizeLimit > 0 && n > r.cfg.FrameSizeLimit-frameSizeMargin
}

// reconcile builds the reply to m. onHave and onNeed receive the differences
// an initiator finds in IdList ranges; the responder passes nil.
func (r *reconciler) reconcile(m Message, onHave, onNeed func(ID) error) ([]byte, error) {
	size := r.storage.Size()
	e := newEncoder()
	var (
		prevBound Bound
		prevIndex int
		skip      bool // a Skip up to prevBound is owed before the next output
	)
	flushSkip := func() error {
		if !skip {
			return nil
		}
		skip = false
		return e.appendRange(Range{Upper: prevBound, Mode: ModeSkip})
	}
	// finish closes the reply with one Fingerprint range over everything from
	// index from (where the last written bound sits) to the end, so that the
	// unanswered rest is taken up in the next round.
	finish := func(from int) ([]byte, error) {
		fp, err := r.storage.Fingerprint(from, size)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrStorage, err)
		}
		if err := e.appendRange(Range{Upper: infinityBound, Mode: ModeFingerprint, Fingerprint: fp}); err != nil {
			return nil, err
		}
		return e.buf, nil
	}

	for i, rg := range m.Ranges {
		if rg.Upper.Compare(prevBound) < 0 {
			return nil, fmt.Errorf("%w: range %d ends below the range before it", ErrMalformed, i)
		}
		lower := prevIndex
		upper, err := r.storage.LowerBound(lower, size, rg.Upper)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrStorage, err)
		}
		snapshot, snapshotSkip := e, skip

		switch rg.Mode {
		case ModeSkip:
			skip = true
		case ModeFingerprint:
			ours, err := r.storage.Fingerprint(lower, upper)
			if err != nil {
				return nil, fmt.Errorf("%w: %w", ErrStorage, err)
			}
			if ours == rg.Fingerprint {
				skip = true
				break
			}
			if err := flushSkip(); err != nil {
				return nil, err
			}
			if err := r.splitRange(&e, lower, upper, rg.Upper); err != nil {
				return nil, err
			}
		case ModeIDList:
			if r.initiator {
				if err := r.diffIDList(lower, upper, rg.IDs, onHave, onNeed); err != nil {
					return nil, err
				}
				skip = true
				break
			}
			if err := flushSkip(); err != nil {
				return nil, err
			}
			end, err := r.appendIDList(&e, lower, upper, rg.Upper)
			if err != nil {
				return nil, err
			}
			if end < upper || r.overFrame(e.len()) {
				return finish(end)
			}
			prevIndex, prevBound = upper, rg.Upper
			continue
		}

		if r.overFrame(e.len()) {
			// This range's answer does not fit: drop it, owe nothing
			// before it, and leave it and the rest for the next round.
			e, skip = snapshot, snapshotSkip
			if err := flushSkip(); err != nil {
				return nil, err
			}
			return finish(lower)
		}
		prevIndex, prevBound = upper, rg.Upper
	}
	return e.buf, nil
}

// items reads [begin, end) from storage.
func (r *reconciler) items(begin, end int) ([]Item, error) {
	out := make([]Item, 0, end-begin)
	err := r.storage.Iterate(begin, end, func(_ int, it Item) bool {
		out = append(out, it)
		return true
	})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrStorage, err)
	}
	return out, nil
}

// splitRange answers a differing range [lower, upper) ending at upperBound:
// an IdList when it is small, else `buckets` Fingerprint sub-ranges of
// near-equal item counts that together cover exactly the same span.
func (r *reconciler) splitRange(e *encoder, lower, upper int, upperBound Bound) error {
	n := upper - lower
	if n < 2*buckets {
		its, err := r.items(lower, upper)
		if err != nil {
			return err
		}
		rg := Range{Upper: upperBound, Mode: ModeIDList}
		for _, it := range its {
			rg.IDs = append(rg.IDs, it.ID)
		}
		return e.appendRange(rg)
	}
	per, extra := n/buckets, n%buckets
	curr := lower
	for i := range buckets {
		size := per
		if i < extra {
			size++
		}
		fp, err := r.storage.Fingerprint(curr, curr+size)
		if err != nil {
			return fmt.Errorf("%w: %w", ErrStorage, err)
		}
		curr += size
		bound := upperBound
		if curr != upper {
			pair, err := r.items(curr-1, curr+1)
			if err != nil {
				return err
			}
			bound = minimalBound(pair[0], pair[1])
		}
		if err := e.appendRange(Range{Upper: bound, Mode: ModeFingerprint, Fingerprint: fp}); err != nil {
			return err
		}
	}
	return nil
}

// appendIDList is the responder's answer to an IdList range: its own ids of
// [lower, upper). Under a frame size limit it stops early and returns the
// index it stopped at; the written range then ends at a bound just before
// that item.
func (r *reconciler) appendIDList(e *encoder, lower, upper int, upperBound Bound) (int, error) {
	rg := Range{Upper: upperBound, Mode: ModeIDList}
	end := upper
	var prev Item
	err := r.storage.Iterate(lower, upper, func(i int, it Item) bool {
		if r.overFrame(e.len() + IDSize*(len(rg.IDs)+1)) {
			end = i
			if i > lower {
				rg.Upper = minimalBound(prev, it)
			} else {
				rg.Upper = boundOf(it)
			}
			return false
		}
		rg.IDs = append(rg.IDs, it.ID)
		prev = it
		return true
	})
	if err != nil {
		return 0, fmt.Errorf("%w: %w", ErrStorage, err)
	}
	return end, e.appendRange(rg)
}

// diffIDList is the initiator's use of the responder's full id list for
// [lower, upper): ids only we hold are have, ids only they hold are need.
func (r *reconciler) diffIDList(lower, upper int, theirs []ID, onHave, onNeed func(ID) error) error {
	remaining := make(map[ID]bool, len(theirs))
	for _, id := range theirs {
		remaining[id] = true
	}
	var cbErr error
	err := r.storage.Iterate(lower, upper, func(_ int, it Item) bool {
		if remaining[it.ID] {
			remaining[it.ID] = false
			return true
		}
		cbErr = onHave(it.ID)
		return cbErr == nil
	})
	if err != nil {
		return fmt.Errorf("%w: %w", ErrStorage, err)
	}
	if cbErr != nil {
		return cbErr
	}
	for _, id := range theirs {
		if remaining[id] {
			remaining[id] = false
			if err := onNeed(id); err != nil {
				return err
			}
		}
	}
	return nil
}
