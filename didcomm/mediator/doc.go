// Package mediator implements the mediator side of
// Coordinate Mediation 3.0 (https://didcomm.org/coordinate-mediation/3.0/),
// Message Pickup 3.0 (https://didcomm.org/messagepickup/3.0/) and the
// mediator's handling of Routing 2.0 forward messages: an anchor holds
// messages for leaves (phones) that are offline, and a leaf that comes back
// collects them.
//
// The queue is persisted (bbolt, one file under the directory the mediator
// is given, every write fsynced before it is acknowledged), so queued
// messages survive a restart of the anchor. A message leaves the queue only
// when the leaf acknowledges it with messages-received; a delivery whose
// acknowledgement is lost is delivered again, and the leaf side (package
// didcomm/mediation's Client, with its Seen store) drops the copy, so each
// message reaches the leaf's application exactly once.
//
// Every queue and list is bounded by a Config value. Live delivery is not
// offered (a leaf polls in its wake window); a live-delivery-change is
// answered with the problem code the protocol names for that.
//
// The protocols' messages and the recipient side (the client a leaf
// uses) are package didcomm/mediation, so that a leaf never links the
// mediator's store, queue and push sender.
//
// It handles already unpacked messages: envelopes are package didcomm's
// job, transports didcomm/transport's, and dispatch didcomm/agent's.
package mediator
