package dashboard

// DefaultPanels returns what a node's dashboard plots, a new slice each
// time so that no importer can change every node's page. A panel whose
// metrics the node has not exported (a service it does not run, or a
// counter with labels that has not counted anything yet) says what will
// appear there and when, instead of drawing an empty plot.
func DefaultPanels() []Panel {
	return []Panel{
		{Title: "Events in", Empty: "No events received yet: a line appears when a client publishes to this relay.", Unit: "events/s", Series: []Series{
			{Metric: "fleetmesh_relay_events_total", Rate: true, By: "result"},
		}},
		{Title: "Events out", Empty: "No events sent yet: a line appears when this relay answers a client's subscription.", Unit: "events/s", Series: []Series{
			{Metric: "fleetmesh_relay_events_sent_total", Rate: true, Name: "to clients"},
		}},
		{Title: "Clients", Empty: "No client has connected yet: lines appear when a Nostr client opens a connection.", Unit: "open", Series: []Series{
			{Metric: "fleetmesh_relay_connections", Name: "connections"},
			{Metric: "fleetmesh_relay_subscriptions", Name: "subscriptions"},
		}},
		{Title: "Mesh peers", Empty: "No mesh peer yet: a line per kind of peer appears once this node connects to another (start it with --join CODE).", Unit: "connected", Series: []Series{
			{Metric: "fleetmesh_mesh_peers", By: "class,transport"},
		}},
		{Title: "Sync traffic", Empty: "No sync traffic yet: lines appear when this node exchanges events with mesh peers.", Unit: "bytes/s", Series: []Series{
			{Metric: "fleetmesh_mesh_sync_bytes_total", Rate: true, By: "direction", Name: "sync"},
			{Metric: "fleetmesh_mesh_gossipsub_bytes_total", Rate: true, By: "direction", Name: "gossip"},
		}},
		{Title: "Catch-up", Empty: "No catch-up has run: a line appears when this node fetches events it lacks from peers (a gateway: from its backend).", Unit: "events", Series: []Series{
			{Metric: "fleetmesh_mesh_sync_pending_events", Name: "still to move"},
			{Metric: "fleetmesh_gateway_catchup_pending_events", By: "direction", Name: "gateway"},
		}},
		{Title: "Sync events", Empty: "No events synced yet: lines appear when events move between this node and its mesh peers.", Unit: "events/s", Series: []Series{
			{Metric: "fleetmesh_mesh_sync_events_total", Rate: true, By: "direction"},
		}},
		{Title: "Storage", Empty: "Nothing stored yet: the line appears with the first event stored.", Unit: "bytes", Series: []Series{
			{Metric: "fleetmesh_store_bytes", Name: "used"},
			{Metric: "fleetmesh_store_max_bytes", Name: "bound", Bound: true},
		}},
		{Title: "Durable shards", Empty: "No shards held yet: lines appear once this node is in the mesh and keeps shards for durability.", Unit: "shards", Series: []Series{
			{Metric: "fleetmesh_mesh_durable_shards", Name: "held"},
			{Metric: "fleetmesh_mesh_shards_below_replication", Name: "below R"},
		}},
		{Title: "Receipts", Empty: "No receipts yet: lines appear once this node and a peer close an accounting window together (hourly by default).", Unit: "per second", Series: []Series{
			{Metric: "fleetmesh_accounting_receipts_total", Rate: true, By: "result"},
			{Metric: "fleetmesh_accounting_disputes_total", Rate: true, By: "state", Name: "disputes"},
			{Metric: "fleetmesh_accounting_fork_proofs_total", Rate: true, By: "source", Name: "fork proofs"},
		}},
		{Title: "Standing", Empty: "No standing computed yet: lines appear once this node has verified receipts and computes whom it trusts.", Unit: "per second, nodes, seconds", Series: []Series{
			{Metric: "fleetmesh_standing_updates_total", Rate: true, Name: "incremental updates"},
			{Metric: "fleetmesh_standing_recomputations_total", Rate: true, Name: "recomputations"},
			{Metric: "fleetmesh_standing_nodes", Name: "nodes in view"},
			{Metric: "fleetmesh_standing_last_recompute_seconds", Name: "last recomputation"},
		}},
		{Title: "Labels", Empty: "No labels yet: lines appear when this node or its peers publish labels about spam, abusive content or misbehaving nodes (fleetmesh label).", Unit: "labels, per second", Series: []Series{
			{Metric: "fleetmesh_labels_held", By: "tier", Name: "held"},
			{Metric: "fleetmesh_labels_received_total", Rate: true, By: "result", Name: "received"},
			{Metric: "fleetmesh_labels_refusals_total", Rate: true, By: "rule", Name: "refused"},
		}},
		{Title: "Compute", Empty: "No jobs yet: lines appear when this node runs a job for another node ([compute] offer = true) or requests one (fleetmesh job run).", Unit: "per second", Series: []Series{
			{Metric: "fleetmesh_compute_runs_total", Rate: true, By: "outcome", Name: "runs for others"},
			{Metric: "fleetmesh_compute_jobs_total", Rate: true, By: "verdict", Name: "jobs requested"},
			{Metric: "fleetmesh_compute_disputes_total", Rate: true, Name: "executors caught"},
		}},
		{Title: "Grants", Empty: "No grant refusals: a line appears if a peer asks for more than its grant allows.", Unit: "refusals/s", Series: []Series{
			{Metric: "fleetmesh_accounting_grant_refusals_total", Rate: true, By: "service,reason"},
		}},
		{Title: "iroh", Empty: "No iroh figures yet: the line shows 1 once the iroh helper serves, 0 while it is off (fleetmesh status says why).", Unit: "up, connections", Series: []Series{
			{Metric: "fleetmesh_iroh_up", Name: "up (1 = serving)"},
			{Metric: "fleetmesh_iroh_connections", By: "path", Name: "connections"},
		}},
		{Title: "Refusals", Empty: "Nothing refused yet: lines appear when the relay or the boundary policy refuses an event, by reason.", Unit: "refusals/s", Series: []Series{
			{Metric: "fleetmesh_relay_rejections_total", Rate: true, By: "reason"},
			{Metric: "fleetmesh_boundary_refusals_total", Rate: true, By: "rule", Name: "boundary"},
		}},
	}
}
