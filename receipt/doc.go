// Package receipt is fleetmesh's accounting record (spec/receipts.md): a
// receipt says what two nodes served each other in one accounting window,
// carries both sides' figures, is signed by both over identical canonical
// bytes, and is chained to the pair's previous receipt by CID and sequence
// number, so a pair's history cannot be rewritten without a fork that
// anyone can prove (ForkProof). A report is one node's signed list of a
// window's receipts and disputed windows.
//
// This package holds the format, its canonical form (deterministic CBOR,
// package internal/canon), signing, and verification of one receipt, of a
// chain and of a fork proof, with no input but the records themselves: a
// did:key is its own public key. The settlement field is reserved: it must
// be present and null, and a receipt with anything else there is invalid
// everywhere.
//
// It is not the metering, the window-close exchange or storage (package
// accounting), nor grants (package grant). It is hand-written because no
// standard record fits (spec/receipts.md says why).
package receipt
