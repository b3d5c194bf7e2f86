// Package boundary is the policy of what never crosses between the mesh and
// a private relay backend, and what no node ever replicates (docs/design.md §5):
// custody material (NIP-46 remote signing, events carrying nsec1/ncryptsec1
// keys), billing records, push-notification subscriptions, account
// credentials (NIP-42 and NIP-98 auth events, Blossom authorizations) and
// ephemeral events.
//
// The rules are data: a default set (Default) that configuration extends
// with more kinds and marker tags. A Policy checks an event and says which
// rule refused it and why. Where it applies:
//
//   - the gateway, in both directions (backend → mesh and mesh → backend);
//   - every node's replication path, inbound and outbound (the mesh hook);
//   - every node's relay, for the classes that may not be stored at all
//     (custody, credentials, billing, push): a client gets "blocked:" with
//     the reason. Ephemeral events are still delivered live to the node's
//     own clients; they are only never replicated.
//
// Every refusal is counted by rule and direction (Prometheus) and logged
// with its rule. The spec page is spec/boundary.md.
//
// It is not a spam filter or a content-moderation policy (that is shared
// threat intelligence, docs/design.md §7), and it does not move events.
package boundary
