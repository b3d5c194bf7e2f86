package relay

import (
	"cmp"
	"encoding/json"
	"net/http"
)

// SupportedNIPs returns the NIPs this relay implements, as its NIP-11
// document lists them. It returns a new slice each time, so no caller can
// change what the relay announces.
func SupportedNIPs() []int { return []int{1, 9, 11, 40, 42, 45, 70, 77} }

// supportedNIPs is SupportedNIPs and, where the management API is served,
// NIP-86 (and NIP-98, its authorization).
func (r *Relay) supportedNIPs() []int {
	nips := SupportedNIPs()
	if r.Manage != nil {
		nips = append(nips, 86, 98)
	}
	return nips
}

func (r *Relay) serveNIP11(w http.ResponseWriter, _ *http.Request) {
	cfg := &r.cfg
	name, desc, icon := cfg.Name, cfg.Description, ""
	if i := r.info.Load(); i != nil {
		name, desc, icon = cmp.Or(i.Name, name), cmp.Or(i.Description, desc), i.Icon
	}
	doc := map[string]any{
		"name":           name,
		"description":    desc,
		"supported_nips": r.supportedNIPs(),
		"software":       "fleetmesh",
		"version":        cmp.Or(cfg.Software, "devel"),
		"limitation": map[string]any{
			"max_message_length":     cfg.MaxMessageBytes,
			"max_subscriptions":      cfg.MaxSubscriptions,
			"max_filters":            cfg.MaxFilters,
			"max_limit":              cfg.MaxLimit,
			"default_limit":          cfg.DefaultLimit,
			"max_event_tags":         cfg.MaxTags,
			"max_content_length":     cfg.MaxContentBytes,
			"created_at_upper_limit": cfg.MaxFutureSeconds,
			"auth_required":          false,
			"restricted_writes":      len(cfg.AuthRequiredKinds) > 0,
		},
	}
	if icon != "" {
		doc["icon"] = icon
	}
	if cfg.Contact != "" {
		doc["contact"] = cfg.Contact
	}
	if cfg.PubKey != "" {
		doc["pubkey"] = cfg.PubKey
	}
	if len(cfg.Self) > 0 {
		doc["fleetmesh"] = cfg.Self
	}
	w.Header().Set("Content-Type", "application/nostr+json")
	// NIP-11: browsers fetch this cross-origin with a custom Accept header.
	w.Header().Set("Access-Control-Allow-Origin", "*")
	w.Header().Set("Access-Control-Allow-Headers", "*")
	w.Header().Set("Access-Control-Allow-Methods", "GET, OPTIONS")
	json.NewEncoder(w).Encode(doc)
}
