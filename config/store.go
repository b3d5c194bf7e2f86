package config

import (
	"fmt"
	"net/url"
	"strings"
)

// Store backends, the values of [store] backend.
const (
	// StorePebble is the embedded store in the node home, the default.
	StorePebble = "pebble"
	// StorePostgres is a PostgreSQL database that several front-end
	// processes of one node share.
	StorePostgres = "postgres"
)

// validate checks [store] backend and postgres_url.
func (s *StoreConfig) validate() error {
	switch s.Backend {
	case "":
		s.Backend = StorePebble
	case StorePebble, StorePostgres:
	default:
		return fmt.Errorf("store.backend %q: must be 'pebble' or 'postgres'", s.Backend)
	}
	if s.Backend == StorePebble {
		return nil
	}
	if s.PostgresURL == "" {
		return fmt.Errorf("store.postgres_url: backend 'postgres' needs a connection string, e.g. postgres_url = 'postgres://fleetmesh:secret@127.0.0.1:5432/fleetmesh'")
	}
	u, err := url.Parse(s.PostgresURL)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return fmt.Errorf("store.postgres_url: %q is not a postgres:// URL; write postgres://user:password@host:port/database", redactURL(s.PostgresURL))
	}
	if strings.TrimPrefix(u.Path, "/") == "" {
		return fmt.Errorf("store.postgres_url: %q names no database; add it after the host, e.g. postgres://%s/fleetmesh", redactURL(s.PostgresURL), u.Host)
	}
	return nil
}

// redactURL hides a password in a connection string an error repeats.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		if err != nil {
			return "(unparsable)"
		}
		return raw
	}
	return u.Redacted()
}
