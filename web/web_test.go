package web

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestAppServesFiles(t *testing.T) {
	h := App()
	for _, tc := range []struct {
		path, status, ctype string
	}{
		{"/app/", "200", "text/html; charset=utf-8"},
		{"/app/index.html", "200", "text/html; charset=utf-8"},
		{"/app/app.js", "200", "text/javascript; charset=utf-8"},
		{"/app/sw.js", "200", "text/javascript; charset=utf-8"},
		{"/app/app.css", "200", "text/css; charset=utf-8"},
		{"/app/manifest.webmanifest", "200", "application/manifest+json"},
		{"/app/icon.svg", "200", "image/svg+xml"},
		{"/app/nope.js", "404", "text/plain; charset=utf-8"},
		{"/app/../web.go", "404", "text/plain; charset=utf-8"},
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, tc.path, nil))
		if got := rec.Result().Status[:3]; got != tc.status {
			t.Errorf("%s: status %s, want %s", tc.path, got, tc.status)
		}
		if got := rec.Header().Get("Content-Type"); got != tc.ctype {
			t.Errorf("%s: Content-Type %q, want %q", tc.path, got, tc.ctype)
		}
		if tc.status == "200" && (rec.Header().Get("Cache-Control") != "no-cache" || rec.Header().Get("ETag") == "" || rec.Body.Len() == 0) {
			t.Errorf("%s: headers %v, %d bytes", tc.path, rec.Header(), rec.Body.Len())
		}
	}
}

// TestAppRevalidates: a conditional GET with the file's ETag is answered
// 304 without a body; another ETag gets the file.
func TestAppRevalidates(t *testing.T) {
	h := App()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/app/sw.js", nil))
	etag := rec.Header().Get("ETag")
	if rec.Header().Get("Service-Worker-Allowed") != AppPath {
		t.Errorf("sw.js: Service-Worker-Allowed %q", rec.Header().Get("Service-Worker-Allowed"))
	}
	for _, tc := range []struct {
		etag   string
		status int
		body   bool
	}{{etag, http.StatusNotModified, false}, {`"other"`, http.StatusOK, true}} {
		req := httptest.NewRequest(http.MethodGet, "/app/sw.js", nil)
		req.Header.Set("If-None-Match", tc.etag)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != tc.status || (rec.Body.Len() > 0) != tc.body {
			t.Errorf("If-None-Match %s: %d with %d bytes", tc.etag, rec.Code, rec.Body.Len())
		}
	}
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/app/", strings.NewReader("x")))
	if rec.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST /app/: %d", rec.Code)
	}
}

func TestWantsPage(t *testing.T) {
	for _, tc := range []struct {
		name, method, path, accept, upgrade string
		want                                bool
	}{
		{"browser", "GET", "/", "text/html,application/xhtml+xml,*/*;q=0.8", "", true},
		{"head", "HEAD", "/", "text/html", "", true},
		{"nip11", "GET", "/", "application/nostr+json", "", false},
		{"both", "GET", "/", "text/html, application/nostr+json", "", false},
		{"websocket", "GET", "/", "text/html", "websocket", false},
		{"curl", "GET", "/", "*/*", "", false},
		{"other path", "GET", "/x", "text/html", "", false},
		{"post", "POST", "/", "text/html", "", false},
	} {
		req := httptest.NewRequest(tc.method, tc.path, nil)
		req.Header.Set("Accept", tc.accept)
		if tc.upgrade != "" {
			req.Header.Set("Upgrade", tc.upgrade)
			req.Header.Set("Connection", "Upgrade")
		}
		if got := WantsPage(req); got != tc.want {
			t.Errorf("%s: WantsPage %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestPageEscapes(t *testing.T) {
	rec := httptest.NewRecorder()
	Page(func() NodeInfo {
		return NodeInfo{Name: "<script>x</script>", DID: "did:key:z6Mkabc", Class: "home", RelayURL: "ws://h", Healthy: false, Health: "store: full"}
	}).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
	body := rec.Body.String()
	for _, want := range []string{"did:key:z6Mkabc", "&lt;script&gt;", `class="bad">unhealthy: store: full`, `href="/app/"`} {
		if !strings.Contains(body, want) {
			t.Errorf("page lacks %q:\n%s", want, body)
		}
	}
	if strings.Contains(body, "<script>x") {
		t.Error("the page did not escape the name")
	}
}
