package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// The files in deploy/ are what operators copy; these tests run them, so
// that an example that no longer works fails here rather than on a server.

// TestSystemdUnitVerifies checks deploy/fleetmesh.service, with the
// Raspberry Pi's drop-in deploy/fleetmesh-pi.conf beside it, with
// systemd-analyze, with ExecStart pointed at the binary under test.
func TestSystemdUnitVerifies(t *testing.T) {
	needBinary(t)
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Fatal("systemd-analyze is missing (apt-get install systemd; scripts/test.sh does)")
	}
	unit, err := os.ReadFile(filepath.Join(moduleRoot, "deploy", "fleetmesh.service"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(unit), "ExecStart=/usr/local/bin/fleetmesh run\n") {
		t.Fatal("deploy/fleetmesh.service: ExecStart is not /usr/local/bin/fleetmesh run")
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "fleetmesh.service")
	fixed := strings.Replace(string(unit), "/usr/local/bin/fleetmesh", binary, 1)
	if err := os.WriteFile(path, []byte(fixed), 0o644); err != nil {
		t.Fatal(err)
	}
	dropin, err := os.ReadFile(filepath.Join(moduleRoot, "deploy", "fleetmesh-pi.conf"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "fleetmesh.service.d"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "fleetmesh.service.d", "memory.conf"), dropin, 0o644); err != nil {
		t.Fatal(err)
	}
	verify := exec.Command(analyze, "verify", path)
	// The unit's own directory first, so that its drop-in is read (a
	// trailing ':' keeps the default search path after it).
	verify.Env = append(os.Environ(), "SYSTEMD_UNIT_PATH="+dir+":")
	out, err := verify.CombinedOutput()
	// verify also reports units the host lacks that the file names only
	// in After=/Wants= (network-online.target exists everywhere systemd
	// does); anything naming our unit or its drop-in is a real finding.
	if err != nil || strings.Contains(string(out), "fleetmesh.service") || strings.Contains(string(out), "memory.conf") {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
}

// TestTLSBehindNginx runs deploy/nginx.conf's server block, with a test
// certificate and ports, in front of a node: a client connects over wss://,
// publishes and reads its event back, and NIP-11 answers over https://.
func TestTLSBehindNginx(t *testing.T) {
	needBinary(t)
	nginx, err := exec.LookPath("nginx")
	if err != nil {
		t.Fatal("nginx is missing (apt-get install nginx-light; scripts/test.sh does)")
	}
	dir := t.TempDir()
	certFile, keyFile, certPEM := writeSelfSignedCert(t, dir)

	tlsAddr := gwFreeAddr(t)
	// As deploy/nginx.conf's comment says to configure the node.
	home := newHome(t, "[relay]\ntrusted_proxies = ['127.0.0.1/32']\n")
	n := startNodeOnFreePort(t, home)
	nodeAddr := strings.TrimPrefix(n.url, "ws://")

	site := nginxSite(t, "nginx.conf", tlsAddr, certFile, keyFile, [2]string{"http://127.0.0.1:7447", "http://" + nodeAddr})
	out := startNginx(t, nginx, dir, site)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, tlsConf := dialThroughNginx(ctx, t, tlsAddr, certPEM, dir, out)
	defer c.Close()

	u, err := newUser()
	if err != nil {
		t.Fatal(err)
	}
	ev, err := u.sign(1, randomContent("tls"), nil)
	if err != nil {
		t.Fatal(err)
	}
	ok, err := publishOne(c, ev)
	if err != nil || !ok.Accepted {
		t.Fatalf("publish over wss: %+v %v", ok, err)
	}
	got, err := storedEvents(c, "tls", map[string]any{"ids": []string{ev.ID}})
	if err != nil || len(got) != 1 || got[0].ID != ev.ID {
		t.Fatalf("read back over wss: %v %v", got, err)
	}

	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: tlsConf}, Timeout: 10 * time.Second}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+tlsAddr+"/", nil)
	req.Header.Set("Accept", "application/nostr+json")
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(resp.Header.Get("Content-Type"), "application/nostr+json") {
		t.Fatalf("NIP-11 over https: %s %q", resp.Status, resp.Header.Get("Content-Type"))
	}
	// The example keeps /metrics off the public name.
	req, _ = http.NewRequestWithContext(ctx, http.MethodGet, "https://"+tlsAddr+"/metrics", nil)
	if resp, err = hc.Do(req); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("/metrics through the proxy: %s, want 404", resp.Status)
	}
}

// writeSelfSignedCert writes a certificate for relay.example.org and
// 127.0.0.1 and its key into dir, for nginx, and returns the files and
// the certificate for the client's pool.
func writeSelfSignedCert(t *testing.T, dir string) (certFile, keyFile string, certPEM []byte) {
	t.Helper()
	certPEM, keyPEM := selfSignedCert(t)
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, keyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile, certPEM
}

// selfSignedCert makes a certificate for relay.example.org and 127.0.0.1.
func selfSignedCert(t *testing.T) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "relay.example.org"},
		DNSNames:     []string{"relay.example.org"},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
}

// TestContainerLayoutRunsIroh lays out the image's files as the
// Dockerfile does, in a temporary root (no container engine runs here):
// the helper from scripts/iroh-helper.sh, as its helper stage runs it,
// beside the binary in /opt/fleetmesh, and /usr/local/bin/fleetmesh a
// link to it. The node started through the link, with no [iroh]
// helper_dir, finds the helper beside its real path and serves iroh.
func TestContainerLayoutRunsIroh(t *testing.T) {
	needNode(t)
	df, err := os.ReadFile(filepath.Join(moduleRoot, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{
		`bash scripts/iroh-helper.sh /out/iroh/helper "${TARGETOS}/${TARGETARCH}"`,
		"COPY --from=build /out/fleetmesh /opt/fleetmesh/fleetmesh\n",
		"COPY --from=helper /out/iroh /opt/fleetmesh/iroh\n",
		"RUN ln -s /opt/fleetmesh/fleetmesh /usr/local/bin/fleetmesh\n",
		"apt-get install -y --no-install-recommends nodejs",
	} {
		if !strings.Contains(string(df), line) {
			t.Fatalf("the Dockerfile no longer has %q: update this test with it", line)
		}
	}
	root := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "bash", filepath.Join(moduleRoot, "scripts", "iroh-helper.sh"),
		filepath.Join(root, "out", "iroh", "helper"), "linux/amd64").CombinedOutput(); err != nil {
		t.Fatalf("iroh-helper.sh: %v\n%s", err, out)
	}
	opt := filepath.Join(root, "opt", "fleetmesh")
	copyFile(t, binary, filepath.Join(opt, "fleetmesh"))
	if err := os.Chmod(filepath.Join(opt, "fleetmesh"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(root, "out", "iroh"), filepath.Join(opt, "iroh")); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(root, "usr", "local", "bin", "fleetmesh")
	if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(opt, "fleetmesh"), link); err != nil {
		t.Fatal(err)
	}
	home := newHome(t, "[iroh]\nbind = [\"127.0.0.1:0\"]\n")
	cmd := exec.Command(link, "run", "--home", home, "--listen", "127.0.0.1:0")
	cmd.Dir = t.TempDir()
	n, err := startNodeCmd(t, home, cmd)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(startTimeout)
	for !strings.Contains(n.stdout.String(), "\niroh ") {
		if time.Now().After(deadline) {
			t.Fatalf("no iroh line from the node in the image's layout\n%s", n.output())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if body := httpGet(t, n.httpURL()+"/metrics"); !strings.Contains(body, "\nfleetmesh_iroh_up 1\n") {
		t.Fatalf("/metrics has no fleetmesh_iroh_up 1:\n%s", body)
	}
	if st := irohStatus(t, home); st.State != "up" {
		t.Fatalf("fleetmesh status --json: iroh %+v, want up", st)
	}
}

// startNginx runs nginx with site, a server block (and whatever it
// declares beside it), in a minimal main config under dir, as Debian's
// /etc/nginx/nginx.conf is around sites-enabled; it is stopped when the
// test ends. It returns nginx's output.
// nginxSite reads deploy/name and points it at the test: its TLS server
// listens on tlsAddr with the test certificate, and the further
// replacements more are made. A text it was to replace and no longer
// finds fails the test.
func nginxSite(t *testing.T, name, tlsAddr, certFile, keyFile string, more ...[2]string) string {
	t.Helper()
	block, err := os.ReadFile(filepath.Join(moduleRoot, "deploy", name))
	if err != nil {
		t.Fatal(err)
	}
	site := string(block)
	for _, r := range append([][2]string{
		{"listen 443 ssl;", "listen " + tlsAddr + " ssl;"},
		{"listen [::]:443 ssl;", ""},
		{"/etc/letsencrypt/live/relay.example.org/fullchain.pem", certFile},
		{"/etc/letsencrypt/live/relay.example.org/privkey.pem", keyFile},
	}, more...) {
		if !strings.Contains(site, r[0]) {
			t.Fatalf("deploy/%s no longer has %q: update this test with it", name, r[0])
		}
		site = strings.ReplaceAll(site, r[0], r[1])
	}
	return site
}

// dialThroughNginx dials wss://tlsAddr trusting the test certificate
// certPEM, again until it answers or ctx ends (nginx may still be
// starting), and fails with nginx's output and its error log in dir. It
// returns the connection and the TLS configuration it used.
func dialThroughNginx(ctx context.Context, t *testing.T, tlsAddr string, certPEM []byte, dir string, out *lockedBuffer) (*websocket.Conn, *tls.Config) {
	t.Helper()
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(certPEM)
	tlsConf := &tls.Config{RootCAs: pool, ServerName: "relay.example.org"}
	dialer := websocket.Dialer{TLSClientConfig: tlsConf, HandshakeTimeout: 5 * time.Second}
	for {
		c, _, err := dialer.DialContext(ctx, "wss://"+tlsAddr, nil)
		if err == nil {
			return c, tlsConf
		}
		if ctx.Err() != nil {
			logs, _ := os.ReadFile(filepath.Join(dir, "error.log"))
			t.Fatalf("wss through nginx: %v\nnginx: %s\n%s", err, out.String(), logs)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func startNginx(t *testing.T, nginx, dir, site string) *lockedBuffer {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, "site.conf"), []byte(site), 0o644); err != nil {
		t.Fatal(err)
	}
	// A minimal main config around the server block, as Debian's
	// /etc/nginx/nginx.conf is around sites-enabled.
	user := ""
	if os.Geteuid() == 0 {
		user = "user root;\n"
	}
	main := fmt.Sprintf(`%sdaemon off;
worker_processes 1;
pid %[2]s/nginx.pid;
error_log %[2]s/error.log;
events { worker_connections 64; }
http {
    access_log off;
    client_body_temp_path %[2]s/body;
    proxy_temp_path %[2]s/proxy;
    fastcgi_temp_path %[2]s/fastcgi;
    uwsgi_temp_path %[2]s/uwsgi;
    scgi_temp_path %[2]s/scgi;
    include %[2]s/site.conf;
}
`, user, dir)
	if err := os.WriteFile(filepath.Join(dir, "nginx.conf"), []byte(main), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(nginx, "-p", dir, "-c", filepath.Join(dir, "nginx.conf"))
	out := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	// nginx's worker outlives a killed master: run them in a process group
	// of their own and stop the whole group.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		cmd.Wait()
	})
	return out
}
