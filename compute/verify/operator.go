package verify

import (
	"net/netip"
	"sort"
)

// OperatorKey names something two executors can be seen to share, which
// suggests one operator runs both: "ip4:203.0.113.0/24" (an IPv4 /24),
// "ip6:2001:db8:1::/48" (an IPv6 /48, a site), or "op:ID" (an operator
// id the node announces). Two candidates that share any key are never
// picked for the same job.
type OperatorKey string

// Candidate is an executor that can take a job: its DID and every
// OperatorKey the mesh can tell of it.
type Candidate struct {
	DID       string
	Operators []OperatorKey
}

// Operators returns the operator keys of a node with the given
// addresses and announced operator id (empty when it announces none),
// sorted and without repeats. Loopback, unspecified, link-local and
// multicast addresses are skipped: they tell nothing about who runs a
// node (every node of a one-host test shares 127.0.0.1). Private
// addresses are kept: two nodes in one private /24 are most likely one
// site.
func Operators(addrs []netip.Addr, operatorID string) []OperatorKey {
	set := map[OperatorKey]bool{}
	for _, a := range addrs {
		a = a.Unmap()
		if !a.IsValid() || a.IsLoopback() || a.IsUnspecified() || a.IsLinkLocalUnicast() ||
			a.IsLinkLocalMulticast() || a.IsMulticast() {
			continue
		}
		if a.Is4() {
			p, _ := a.Prefix(24)
			set[OperatorKey("ip4:"+p.String())] = true
		} else {
			p, _ := a.Prefix(48)
			set[OperatorKey("ip6:"+p.String())] = true
		}
	}
	if operatorID != "" {
		set[OperatorKey("op:"+operatorID)] = true
	}
	keys := make([]OperatorKey, 0, len(set))
	for k := range set {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
	return keys
}

// shares reports whether a and b have an operator key in common.
func shares(a, b []OperatorKey) bool {
	for _, x := range a {
		for _, y := range b {
			if x == y {
				return true
			}
		}
	}
	return false
}
