// Package mediation is the wire of Coordinate Mediation 3.0
// (https://didcomm.org/coordinate-mediation/3.0/), Message Pickup 3.0
// (https://didcomm.org/messagepickup/3.0/) and fleetmesh's push/1.0 (the
// message types and bodies both sides speak) and their recipient side: the
// Client a leaf (a phone) uses to register with its mediator, collect what
// was queued for it while it slept, and send any other request its home
// node serves (a leaf's receipts go this way), with Seen, the leaf's record
// of deliveries it already handled.
//
// It is not the mediator (package didcomm/mediator, with its queue, store
// and push sender), so that a leaf, which must stay small enough to bind
// with gomobile, links only this side.
package mediation
