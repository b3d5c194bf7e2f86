// Package web is what a browser gets from a fleetmesh node: the browser
// leaf (an installable web app, spec/web.md) served at /app/ from files
// embedded in the binary, and the node's own short HTML page at / for a
// browser that asks for HTML.
//
// The app's source is under web/src/ and is built with esbuild
// (web/build.mjs, from web/package-lock.json) into web/dist/, which is
// committed so that a node serves the app with no Node.js on the machine;
// scripts/test.sh rebuilds it and fails when the committed files differ.
//
// It is not the leaf protocol (package leaf and the JavaScript under
// web/src/didcomm and web/src/leaf) and not the relay: it serves files and
// one page. The file server is hand-written (a few lines over embed.FS)
// because http.FileServer gives no control over caching per file, and the
// service worker must be revalidated on every load while the rest is
// served by content hash.
package web
