package node

import (
	"context"
	"net/netip"

	"github.com/prometheus/client_golang/prometheus"

	"fleetmesh.org/fleetmesh/manage"
	"fleetmesh.org/fleetmesh/nostr"
	"fleetmesh.org/fleetmesh/relay"
)

// openManage opens the operator's lists in the node home, puts them on the
// relay's event and connection paths, and serves NIP-86 on the relay URL
// (package manage).
func openManage(opts Options, st EventStore, rl *relay.Relay, reg prometheus.Registerer) (*manage.Lists, error) {
	cfg := opts.Config.Manage
	admins, err := cfg.AdminKeys()
	if err != nil {
		return nil, err
	}
	lists, err := manage.Open(opts.Home.Path("."), manage.Limits{MaxEntries: cfg.MaxEntries})
	if err != nil {
		return nil, err
	}
	m := manage.NewMetrics(reg)
	rl.RejectEvent = append(rl.RejectEvent, lists.RelayHook(m))
	rl.RefuseClient = lists.ClientHook(m)
	rl.Manage = manage.NewAPI(lists, manage.Options{
		Admins:     admins,
		AuthWindow: cfg.AuthWindow.Duration,
		Delete:     st.Delete,
		Release: func(ctx context.Context, evJSON []byte) error {
			var ev nostr.Event
			if err := ev.UnmarshalJSON(evJSON); err != nil {
				return err
			}
			_, err := rl.AddEvent(ctx, &ev, relay.FromClient)
			return err
		},
		SetInfo: func(name, description, icon string) {
			rl.SetInfo(relay.Info{Name: name, Description: description, Icon: icon})
		},
		CloseClients: func(p netip.Prefix) int {
			return rl.CloseClients(func(client string) bool { return manage.ClientIn(client, p) })
		},
		Log:     opts.Log,
		Metrics: m,
	})
	return lists, nil
}
