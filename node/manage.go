package node

import (
	"context"
	"net/netip"

	"github.com/prometheus/client_golang/prometheus"

	"fleetmesh.org/fleetmesh/manage"
	"fleetmesh.org/fleetmesh/nostr"
	"fleetmesh.org/fleetmesh/pgstore"
	"fleetmesh.org/fleetmesh/relay"
)

// openManage opens the operator's lists, puts them on the relay's event
// and connection paths, and serves NIP-86 on the relay URL (package
// manage). With a PostgreSQL store the lists are the database's, shared by
// every front-end (pgstore.ManageLists); otherwise manage.db in the node
// home, which it returns for the node to back up and close.
func openManage(opts Options, st EventStore, pg *pgstore.Store, rl *relay.Relay, reg prometheus.Registerer) (*manage.Lists, *manage.FileStore, error) {
	cfg := opts.Config.Manage
	admins, err := cfg.AdminKeys()
	if err != nil {
		return nil, nil, err
	}
	var (
		ls   manage.ListStore
		used manage.AuthMemory
		file *manage.FileStore
	)
	if pg != nil {
		shared := pg.ManageLists()
		ls, used = shared, shared
	} else {
		if file, err = manage.OpenFile(opts.Home.Path(".")); err != nil {
			return nil, nil, err
		}
		ls = file
	}
	ctx, cancel := context.WithTimeout(context.Background(), storeOpenTimeout)
	defer cancel()
	lists, err := manage.New(ctx, ls, manage.ListOptions{
		Limits: manage.Limits{MaxEntries: cfg.MaxEntries},
		SetInfo: func(name, description, icon string) {
			rl.SetInfo(relay.Info{Name: name, Description: description, Icon: icon})
		},
		CloseClients: func(p netip.Prefix) int {
			return rl.CloseClients(func(client string) bool { return manage.ClientIn(client, p) })
		},
		Log: opts.Log,
	})
	if err != nil {
		if file != nil {
			file.Close()
		}
		return nil, nil, err
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
		Used:    used,
		Log:     opts.Log,
		Metrics: m,
	})
	return lists, file, nil
}
