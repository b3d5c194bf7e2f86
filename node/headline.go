package node

import (
	"time"

	"fleetmesh.org/fleetmesh/dashboard"
)

// headline is the dashboard's headline from the node's status: the same
// figures `fleetmesh status` prints.
func (n *Node) headline() dashboard.Headline {
	st := n.status()
	h := dashboard.Headline{
		Version:         st.Version,
		Uptime:          time.Duration(st.UptimeSeconds) * time.Second,
		Class:           st.Class,
		ClassConfig:     st.ClassConfig,
		Reachability:    st.Reachability,
		Iroh:            st.Iroh.State,
		IrohWhy:         st.Iroh.Why,
		IrohRelay:       st.Iroh.RelayURL,
		Peers:           st.Peers,
		StorageBytes:    st.Storage.Bytes,
		StorageMaxBytes: st.Storage.MaxBytes,
	}
	for _, k := range st.PeerKinds {
		h.PeerKinds = append(h.PeerKinds, dashboard.PeerKind{Class: k.Class, Transport: k.Transport, Count: k.Count})
	}
	for _, e := range st.Errors {
		h.Errors = append(h.Errors, dashboard.Error{Time: e.Time, Level: e.Level, Message: e.Message, Count: e.Count})
	}
	return h
}
