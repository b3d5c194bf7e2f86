package web

import (
	"encoding/json"
	"html/template"
	"net/http"
	"strings"
)

// NodeInfo is what the node's page and the app's node.json say about the
// node that serves them.
type NodeInfo struct {
	// Name is the relay's NIP-11 name.
	Name     string `json:"name"`
	DID      string `json:"did"`
	Class    string `json:"class"`
	RelayURL string `json:"relay_url"`
	// Healthy and Health are /healthz's verdict and text.
	Healthy bool   `json:"healthy"`
	Health  string `json:"health"`
	// Peers is the number of connected mesh peers.
	Peers   int    `json:"peers"`
	Version string `json:"version"`
}

// WantsPage reports whether a request to / is a browser asking for a
// page: a GET that accepts text/html, is not a WebSocket upgrade and does
// not ask for the NIP-11 document (which keeps its own answer).
func WantsPage(r *http.Request) bool {
	accept := r.Header.Get("Accept")
	return r.URL.Path == "/" && (r.Method == http.MethodGet || r.Method == http.MethodHead) &&
		strings.Contains(accept, "text/html") && !strings.Contains(accept, "application/nostr+json") &&
		!strings.EqualFold(r.Header.Get("Upgrade"), "websocket")
}

var page = template.Must(template.New("node").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Name}}: a fleetmesh node</title>
<style>
body{font:16px/1.5 system-ui,sans-serif;max-width:44rem;margin:2rem auto;padding:0 1rem;color:#111;background:#fff}
code{word-break:break-all;background:#f0f0f0;padding:0 .2em}
dt{font-weight:600;margin-top:.6rem}dd{margin:0}
.ok{color:#05602b}.bad{color:#9b1c1c}
a.app{display:inline-block;margin-top:1.2rem;padding:.6rem 1rem;background:#0b4f8a;color:#fff;border-radius:.3rem;text-decoration:none}
a.app:focus{outline:3px solid #f0b400}
</style></head>
<body><main>
<h1>{{.Name}}</h1>
<p>This is a fleetmesh node: a Nostr relay that shares what it stores with the other
nodes of a mesh. Connect a Nostr client to its relay URL, or open the app in this browser.</p>
<dl>
<dt>DID</dt><dd><code id="did">{{.DID}}</code></dd>
<dt>Class</dt><dd id="class">{{.Class}}</dd>
<dt>Relay URL</dt><dd><code id="relay">{{.RelayURL}}</code></dd>
<dt>Health</dt><dd id="health" class="{{if .Healthy}}ok{{else}}bad{{end}}">{{if .Healthy}}healthy{{else}}unhealthy{{end}}{{if and .Health (ne .Health "ok")}}: {{.Health}}{{end}}</dd>
<dt>Mesh peers</dt><dd id="peers">{{.Peers}}</dd>
{{with .Version}}<dt>Version</dt><dd>{{.}}</dd>{{end}}
</dl>
<a class="app" href="/app/">Open the app</a>
</main></body></html>
`))

// Page serves the node's own HTML page (for requests WantsPage accepts)
// from info, called on every request.
func Page(info func() NodeInfo) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("Vary", "Accept")
		page.Execute(w, info())
	})
}

// NodeJSON serves info as JSON (the app's node.json: spec/web.md), for
// the app's view of its home node.
func NodeJSON(info func() NodeInfo) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		json.NewEncoder(w).Encode(info())
	})
}
