package iroh

import (
	"slices"
)

// SetRelays replaces the relay URLs the endpoint uses: [iroh] relays and
// those learnt from anchors' descriptors (spec/iroh.md, "Relays"). A
// running helper gets them at once (it adds and removes relays in its
// endpoint's relay map); a restarted helper starts with them.
func (e *Endpoint) SetRelays(urls []string) {
	urls = slices.Clone(urls)
	slices.Sort(urls)
	urls = slices.Compact(urls)
	e.mu.Lock()
	if slices.Equal(urls, e.cfg.Relays) {
		e.mu.Unlock()
		return
	}
	e.cfg.Relays = urls
	ctl := e.ctl
	serving := e.serving
	e.mu.Unlock()
	e.log.Info("iroh: relays", "relays", urls)
	if serving && ctl != nil {
		if err := writeMsg(ctl, msg{T: "relays", Relays: urls}); err != nil {
			e.log.Warn("iroh: tell the helper its relays", "err", err)
		}
	}
}

// Relays are the relay URLs the endpoint uses.
func (e *Endpoint) Relays() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.cfg.Relays)
}
