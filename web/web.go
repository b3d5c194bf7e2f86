package web

import (
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"
)

//go:embed dist
var dist embed.FS

// AppPath is where a node serves the app; the app's files are under it.
const AppPath = "/app/"

// asset is one embedded file, with what the handler sends with it.
type asset struct {
	body        []byte
	contentType string
	etag        string
}

// contentTypes are the types of the app's files by extension, set here
// rather than taken from the system's mime tables, which differ between
// machines (a .webmanifest or .mjs is unknown to some).
var contentTypes = map[string]string{
	".html":        "text/html; charset=utf-8",
	".js":          "text/javascript; charset=utf-8",
	".css":         "text/css; charset=utf-8",
	".json":        "application/json",
	".webmanifest": "application/manifest+json",
	".svg":         "image/svg+xml",
	".png":         "image/png",
}

// App serves the built app under AppPath: /app/ is its index.html. Every
// file carries a strong ETag (its SHA-256) and Cache-Control no-cache, so
// a browser revalidates each load with a conditional request answered by
// 304 when nothing changed: the service worker (which must never be
// cached stale, or an update never reaches an installed app) and the
// shell it caches follow the binary that serves them.
func App() http.Handler {
	files := map[string]asset{}
	sub, err := fs.Sub(dist, "dist")
	if err != nil {
		panic(err) // the embed pattern names dist: it is always there
	}
	fs.WalkDir(sub, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		body, err := fs.ReadFile(sub, p)
		if err != nil {
			return err
		}
		ct, ok := contentTypes[path.Ext(p)]
		if !ok {
			ct = mime.TypeByExtension(path.Ext(p))
		}
		sum := sha256.Sum256(body)
		files[p] = asset{body: body, contentType: ct, etag: `"` + base64.RawURLEncoding.EncodeToString(sum[:16]) + `"`}
		return nil
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed: the app's files are read with GET", http.StatusMethodNotAllowed)
			return
		}
		name := strings.TrimPrefix(r.URL.Path, AppPath)
		if name == "" {
			name = "index.html"
		}
		a, ok := files[name]
		if !ok {
			http.Error(w, "not found: no such file in the app (open "+AppPath+")", http.StatusNotFound)
			return
		}
		h := w.Header()
		h.Set("Content-Type", a.contentType)
		h.Set("ETag", a.etag)
		h.Set("Cache-Control", "no-cache")
		h.Set("X-Content-Type-Options", "nosniff")
		if name == "sw.js" {
			// The worker controls all of /app/ (its own folder).
			h.Set("Service-Worker-Allowed", AppPath)
		}
		if r.Header.Get("If-None-Match") == a.etag {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		if r.Method == http.MethodHead {
			return
		}
		w.Write(a.body)
	})
}
