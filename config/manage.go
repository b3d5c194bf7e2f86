package config

import (
	"fmt"
	"time"

	"fleetmesh.org/fleetmesh/config/setting"
	"fleetmesh.org/fleetmesh/manage"
)

// ManageConfig is the [manage] section: who may call the relay management
// API (NIP-86) on the relay URL, and the bounds of the operator's lists
// (package manage, docs/operators.md "Moderating your relay").
type ManageConfig struct {
	// Admins are the Nostr pubkeys (64 hex characters) whose NIP-98
	// signed calls the API takes. Empty: every call is refused.
	Admins []string `toml:"admins" comment:"Nostr pubkeys (hex) that may call the NIP-86 management API on the relay URL; [] refuses every call"`
	// AuthWindow is how far a NIP-98 authorization's created_at may be
	// from this node's clock.
	AuthWindow setting.Duration `toml:"auth_window" comment:"how far a NIP-98 authorization's time may be from this node's clock"`
	// MaxEntries bounds each of the operator's lists (banned and allowed
	// pubkeys, events, kinds, blocked addresses).
	MaxEntries int `toml:"max_entries" comment:"most entries in each ban or allow list"`
}

// DefaultManage is the [manage] a new node starts with: no admins, so the
// API is closed until the operator lists a key.
func DefaultManage() ManageConfig {
	return ManageConfig{Admins: []string{}, AuthWindow: setting.DurationOf(manage.DefaultAuthWindow),
		MaxEntries: manage.DefaultLimits().MaxEntries}
}

// AdminKeys parses Admins.
func (m ManageConfig) AdminKeys() ([][32]byte, error) {
	out := make([][32]byte, 0, len(m.Admins))
	for _, a := range m.Admins {
		k, err := manage.ParseHex32(a)
		if err != nil {
			return nil, fmt.Errorf("manage.admins: %v", err)
		}
		out = append(out, k)
	}
	return out, nil
}

func (m ManageConfig) validate() error {
	if _, err := m.AdminKeys(); err != nil {
		return err
	}
	if m.AuthWindow.Duration < time.Second || m.AuthWindow.Duration > time.Hour {
		return fmt.Errorf("manage.auth_window %s: write a duration from 1s to 1h, e.g. \"60s\"", m.AuthWindow)
	}
	if m.MaxEntries < 1 {
		return fmt.Errorf("manage.max_entries %d: write a positive number, e.g. %d", m.MaxEntries, manage.DefaultLimits().MaxEntries)
	}
	return nil
}
