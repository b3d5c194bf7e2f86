// Package standing computes, at one node and from that node's point of
// view, every other node's standing from verified receipts
// (docs/design.md §6; spec/standing.md): personalised random walks in
// the manner of MeritRank (Nasrulin, Ishmaev, Pouwelse, arXiv
// 2207.09950). Walks start at the computing node and follow the service
// graph (an edge from a node to each node that served it, weighted by
// the service co-signed receipts record, older epochs weighing less);
// each continues with probability alpha; a node reached mostly through
// one other node is cut by the connectivity decay beta; nodes with
// negative evidence (a window this node reported disputed, a fork proof)
// are walls that absorb walks, never negative scores another could
// steer; a fork proof takes both its signers to zero.
//
// The walks are kept between full recomputations and repaired
// incrementally when a receipt arrives (Bahmani, Chowdhury, Goel, VLDB
// 2010): only the walks through the node whose edge changed are touched.
//
// The walks, their repair and the scoring are hand-written: no Go
// library computes MeritRank-style personalised walks (gonum has global
// PageRank and graph algorithms, used by the tests' baselines). It is
// not the receipts' checks (package receipt, package accounting) nor
// the policies that use standing: those read it through Reader.
package standing
