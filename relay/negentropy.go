package relay

import "fleetmesh.org/fleetmesh/nostr"

// handleNeg answers NIP-77 messages. Until the negentropy engine is wired
// in, every NEG-OPEN is refused with NEG-ERR, which NIP-77 clients read as
// "fall back to REQ", and NIP-11 does not list 77.
func (c *conn) handleNeg(m *nostr.ClientMessage) {
	if m.Type == nostr.MsgNegClose {
		return
	}
	c.sendCtl(frame("NEG-ERR", m.SubID, "blocked: negentropy sync (NIP-77) is not enabled on this relay"))
}
