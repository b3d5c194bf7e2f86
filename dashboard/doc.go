// Package dashboard is a node's operator page: plots of its own metrics
// over the last hour and the last day, served at /dashboard on the relay's
// HTTP port (docs/operators.md), under a headline of the node's state
// (version, class, reachability, iroh, peers, storage, last errors), each
// fact with its state in plain words (headline.go).
//
// It samples the node's Prometheus registry in process (every 10 s by
// default) into two bounded rings, one per window, and renders each panel
// as an SVG polyline on the server, in a page that refreshes itself. No
// JavaScript, no chart library, no asset to build: the page works in any
// browser, and the node needs no front-end toolchain for it. A panel is data (a metric name,
// gauge or rate, and one optional label to split by, bounded to MaxSplits
// lines), so a package that adds a metric adds a panel with one line.
//
// The page is for the node's operator: it is served only to requests from
// loopback that did not come through a reverse proxy, unless the operator
// sets a token, which then admits any request that carries it.
//
// It is not a metrics store or a replacement for Prometheus and Grafana:
// it keeps a day at five-minute resolution in memory and forgets it on
// restart. For history, scrape /metrics.
package dashboard
