package relay

import "fmt"

// FileBudget splits the process's file descriptor limit between the
// parts that use descriptors, so that no flood of client connections can
// take the descriptors the store needs to open a table or the mesh needs
// to accept a peer (spec/limits.md).
type FileBudget struct {
	// Limit is the soft RLIMIT_NOFILE after RaiseFileLimit.
	Limit int
	// Store is kept for the event store's tables, WAL and manifest.
	Store int
	// Mesh is what the libp2p resource manager may use (its system FD
	// limit).
	Mesh int
	// Iroh bounds the iroh streams open at once: each is a socket between
	// the node and its iroh helper (package iroh, spec/iroh.md).
	Iroh int
	// Spare covers the operator's own requests (/metrics, /healthz), the
	// DIDComm endpoint, logs, and the short-lived sockets of refusals.
	Spare int
	// Conns is what is left: the most client WebSocket connections open at
	// once.
	Conns int
}

// minConns is the fewest client connections a budget allows, however
// small the file limit: a node that cannot serve clients is no relay.
const minConns = 16

// BudgetFor splits a file limit. The store keeps an eighth (at least 256),
// the mesh an eighth (at least 128), iroh a sixteenth (at least 64), 64
// are spare, and client connections get the rest.
func BudgetFor(limit int) FileBudget {
	b := FileBudget{
		Limit: limit,
		Store: max(256, limit/8),
		Mesh:  max(128, limit/8),
		Iroh:  max(64, limit/16),
		Spare: 64,
	}
	b.Conns = max(minConns, limit-b.Store-b.Mesh-b.Iroh-b.Spare)
	return b
}

// String is the budget as a log line shows it.
func (b FileBudget) String() string {
	return fmt.Sprintf("files %d: store %d, mesh %d, iroh %d, spare %d, client connections %d", b.Limit, b.Store, b.Mesh, b.Iroh, b.Spare, b.Conns)
}
