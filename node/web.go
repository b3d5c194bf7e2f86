package node

import (
	"net/http"
	"strings"

	"fleetmesh.org/fleetmesh/web"
)

// mountWeb serves the browser leaf under /app/ and the node's own page at
// / to browsers asking for HTML; everything else at / (WebSocket,
// NIP-11, plain text) stays the relay's.
func (n *Node) mountWeb(mux *http.ServeMux, relay http.Handler) {
	page := web.Page(n.webInfo)
	mux.Handle("/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if web.WantsPage(r) {
			page.ServeHTTP(w, r)
			return
		}
		relay.ServeHTTP(w, r)
	}))
	mux.Handle("GET "+web.AppPath+"node.json", web.NodeJSON(n.webInfo))
	mux.Handle(web.AppPath, web.App())
}

// webInfo is what the node's page and the app say about this node.
func (n *Node) webInfo() web.NodeInfo {
	st := n.status()
	health, healthy := n.health.summary()
	return web.NodeInfo{
		Name:     n.relay.Config().Name,
		DID:      st.DID,
		Class:    st.Class,
		RelayURL: st.RelayURL,
		Healthy:  healthy,
		Health:   strings.TrimSpace(health),
		Peers:    st.Peers,
		Version:  st.Version,
	}
}
