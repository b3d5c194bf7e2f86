// Package accounting keeps a node's accounts with its counterparties
// (docs/design.md §6; spec/receipts.md, spec/grants.md, spec/disputes.md): at the
// close of each UTC-aligned window it exchanges the window's counts from
// the node's meter with each peer it served or was served by, and either
// both sign a receipt chained to the pair's previous one or, when the
// counts disagree beyond the tolerance, a dispute opens and, unresolved by
// the end of the dispute period, the window is reported as disputed, with
// the evidence both sides exchanged (a digest and sample of the events
// each counted, spec/disputes.md). After the dispute period it signs a
// report of the window. It negotiates grants and answers the services'
// grant checks (Allow, AllowQueue: each service refuses with its own
// refusal), answers anyone who asks for a page of a node's receipts and
// reports (Page; over the mesh's sync protocol, HTTP and report/1.0),
// fetches them page by page from the mesh (SetFetcher, Fetch), and builds,
// keeps and spreads fork proofs from any receipt it is shown.
//
// With a leaf (SetLeaves: the DIDs the node mediates for) the leaf
// proposes every window's receipt when it wakes, whichever way the DIDs
// sort, and the node only answers, keeping the leaf's windows for the
// longer leaf dispute period (spec/leaf.md "Receipts"). The messages, the
// checks either side makes before it signs and the proposer's side of
// the exchange (exchange.Proposer) are in package accounting/exchange,
// which the leaf uses too.
//
// The protocols are DIDComm v2 messages under
// https://fleetmesh.org/protocols/ (receipt/1.0, dispute/1.0, report/1.0,
// grant/1.0), registered on the node's agent and so bound over HTTP and
// libp2p alike. State is one bbolt file: every write is a committed,
// fsynced transaction, and a node stores a receipt before it sends its
// countersignature, and stores what it signed before it sends its
// signature, so a node killed at any point neither loses a receipt nor
// signs two different ones for one sequence number.
//
// It is not the counting itself (package meter), the record format
// (package receipt, package grant) or standing, which a later package
// computes from the receipts this one keeps (Receipts, Reports).
package accounting
