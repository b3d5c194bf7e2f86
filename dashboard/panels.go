package dashboard

// DefaultPanels returns what a node's dashboard plots, a new slice each
// time so that no importer can change every node's page. A panel whose
// metrics the node has not exported (a service it does not run, or a
// counter with labels that has not counted anything yet) says so instead
// of drawing an empty plot.
func DefaultPanels() []Panel {
	return []Panel{
		{Title: "Events in", Unit: "events/s", Series: []Series{
			{Metric: "fleetmesh_relay_events_total", Rate: true, By: "result"},
		}},
		{Title: "Events out", Unit: "events/s", Series: []Series{
			{Metric: "fleetmesh_relay_events_sent_total", Rate: true, Name: "to clients"},
		}},
		{Title: "Clients", Unit: "open", Series: []Series{
			{Metric: "fleetmesh_relay_connections", Name: "connections"},
			{Metric: "fleetmesh_relay_subscriptions", Name: "subscriptions"},
		}},
		{Title: "Mesh peers", Unit: "connected", Series: []Series{
			{Metric: "fleetmesh_mesh_peers", By: "class,transport"},
		}},
		{Title: "Sync traffic", Unit: "bytes/s", Series: []Series{
			{Metric: "fleetmesh_mesh_sync_bytes_total", Rate: true, By: "direction", Name: "sync"},
			{Metric: "fleetmesh_mesh_gossipsub_bytes_total", Rate: true, By: "direction", Name: "gossip"},
		}},
		{Title: "Catch-up", Unit: "events", Series: []Series{
			{Metric: "fleetmesh_mesh_sync_pending_events", Name: "still to move"},
			{Metric: "fleetmesh_gateway_catchup_pending_events", By: "direction", Name: "gateway"},
		}},
		{Title: "Sync events", Unit: "events/s", Series: []Series{
			{Metric: "fleetmesh_mesh_sync_events_total", Rate: true, By: "direction"},
		}},
		{Title: "Storage", Unit: "bytes", Series: []Series{
			{Metric: "fleetmesh_store_bytes", Name: "used"},
			{Metric: "fleetmesh_store_max_bytes", Name: "bound"},
		}},
		{Title: "Durable shards", Unit: "shards", Series: []Series{
			{Metric: "fleetmesh_mesh_durable_shards", Name: "held"},
			{Metric: "fleetmesh_mesh_shards_below_replication", Name: "below R"},
		}},
		{Title: "Receipts", Unit: "per second", Series: []Series{
			{Metric: "fleetmesh_accounting_receipts_total", Rate: true, By: "result"},
			{Metric: "fleetmesh_accounting_disputes_total", Rate: true, By: "state", Name: "disputes"},
			{Metric: "fleetmesh_accounting_fork_proofs_total", Rate: true, By: "source", Name: "fork proofs"},
		}},
		{Title: "Standing", Unit: "per second, nodes, seconds", Series: []Series{
			{Metric: "fleetmesh_standing_updates_total", Rate: true, Name: "incremental updates"},
			{Metric: "fleetmesh_standing_recomputations_total", Rate: true, Name: "recomputations"},
			{Metric: "fleetmesh_standing_nodes", Name: "nodes in view"},
			{Metric: "fleetmesh_standing_last_recompute_seconds", Name: "last recomputation"},
		}},
		{Title: "Grants", Unit: "refusals/s", Series: []Series{
			{Metric: "fleetmesh_accounting_grant_refusals_total", Rate: true, By: "service,reason"},
		}},
		{Title: "Refusals", Unit: "refusals/s", Series: []Series{
			{Metric: "fleetmesh_relay_rejections_total", Rate: true, By: "reason"},
			{Metric: "fleetmesh_boundary_refusals_total", Rate: true, By: "rule", Name: "boundary"},
		}},
	}
}
