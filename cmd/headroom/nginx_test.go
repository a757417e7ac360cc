//go:build linux

package main

import (
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

	"github.com/headroom-dev/headroom/metrics"
	"github.com/headroom-dev/headroom/result"
)

// nginxBin is Debian's nginx, which the test command installs.
const nginxBin = "/usr/sbin/nginx"

// pki is a CA made for one test, a server certificate it signed for
// 127.0.0.1 and a client certificate for CN=user, as PEM files in dir.
type pki struct{ ca, cert, key, clientCert, clientKey string }

func makePKI(t *testing.T, dir string) pki {
	t.Helper()
	write := func(name, typ string, der []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	newKey := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	now := time.Now()
	caKey := newKey()
	ca := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "headroom test CA"}, NotBefore: now.Add(-time.Hour),
		NotAfter: now.Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	leaf := func(serial int64, cn string, usage x509.ExtKeyUsage, ips ...net.IP) ([]byte, []byte) {
		k := newKey()
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn}, NotBefore: now.Add(-time.Hour),
			NotAfter: now.Add(24 * time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{usage}, IPAddresses: ips, KeyUsage: x509.KeyUsageDigitalSignature}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &k.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		kder, err := x509.MarshalECPrivateKey(k)
		if err != nil {
			t.Fatal(err)
		}
		return der, kder
	}
	srvDER, srvKey := leaf(2, "127.0.0.1", x509.ExtKeyUsageServerAuth, net.IPv4(127, 0, 0, 1))
	cliDER, cliKey := leaf(3, "user", x509.ExtKeyUsageClientAuth)
	return pki{ca: write("ca.pem", "CERTIFICATE", caDER),
		cert: write("server.pem", "CERTIFICATE", srvDER), key: write("server-key.pem", "EC PRIVATE KEY", srvKey),
		clientCert: write("client.pem", "CERTIFICATE", cliDER), clientKey: write("client-key.pem", "EC PRIVATE KEY", cliKey)}
}

// freePort is a port on 127.0.0.1 that was free a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// startNginx runs nginx in the foreground with conf (an http block's
// servers, %[1]s standing for dir) on 127.0.0.1, its logs in dir, and stops
// it by its PID when the test ends.
func startNginx(t *testing.T, dir string, port int, servers string) {
	t.Helper()
	if _, err := os.Stat(nginxBin); err != nil {
		t.Fatalf("%s: %v (the test command installs Debian's nginx: ./scripts/test.sh)", nginxBin, err)
	}
	user := ""
	if os.Geteuid() == 0 { // workers run as root too, so they read the test's private directory
		user = "user root;"
	}
	for _, d := range []string{"tmp", "www"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	conf := fmt.Sprintf(`%[2]s
worker_processes 1;
pid %[1]s/nginx.pid;
error_log %[1]s/error.log warn;
events { worker_connections 256; }
http {
    client_body_temp_path %[1]s/tmp/body;
    proxy_temp_path %[1]s/tmp/proxy;
    fastcgi_temp_path %[1]s/tmp/fastcgi;
    uwsgi_temp_path %[1]s/tmp/uwsgi;
    scgi_temp_path %[1]s/tmp/scgi;
%[3]s
}
`, dir, user, fmt.Sprintf(servers, dir, port))
	path := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(nginxBin, "-p", dir, "-c", path, "-e", filepath.Join(dir, "error.log"), "-g", "daemon off; master_process on;")
	out, err := os.Create(filepath.Join(dir, "nginx.out"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = syscall.Kill(pid, syscall.SIGQUIT) // graceful: the workers finish and exit with it
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(pid, syscall.SIGKILL)
			<-exited
		}
	})
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	for deadline := time.Now().Add(15 * time.Second); ; {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return
		}
		select {
		case <-exited:
			b, _ := os.ReadFile(filepath.Join(dir, "nginx.out"))
			e, _ := os.ReadFile(filepath.Join(dir, "error.log"))
			t.Fatalf("nginx exited before it listened on %s:\n%s\n%s", addr, b, e)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("nginx did not listen on %s within 15 s", addr)
		}
	}
}

// TestNginxTLS runs headroom against a real nginx over TLS: HTTP/2 by ALPN,
// a private CA (--ca), a client certificate the server asks for (--cert,
// --key), TLS sessions resumed when nginx ends a connection (after every
// second request: a GOAWAY over HTTP/2), gzipped JSON decoded, a 301
// followed; then the same with --http1, --no-tls-resume and
// --no-compression, and without --ca (refused). nginx's own access log
// says what arrived: protocol, client certificate, whether the session was
// resumed, whether the body went out gzipped.
func TestNginxTLS(t *testing.T) {
	t.Parallel() // beside the rest: a server or a browser of its own, mostly waited on
	dir := t.TempDir()
	keys := makePKI(t, dir)
	port, port2 := freePort(t), freePort(t)
	// A JSON document of ~20 KB that gzip makes ~30 times smaller.
	var doc strings.Builder
	doc.WriteString(`{"ok": true, "posts": [`)
	for i := range 200 {
		fmt.Fprintf(&doc, `{"id": "post%04d", "message": "hello from the load test, again and again"},`, i)
	}
	doc.WriteString(`{"id": "last"}]}`)
	startNginx(t, dir, port, strings.ReplaceAll(`
    log_format tls '$server_protocol $status $request_uri $ssl_client_s_dn $ssl_session_reused $sent_http_content_encoding $server_port:$connection';
    access_log %[1]s/access.log tls;
    keepalive_requests 2;
    gzip on;
    gzip_types application/json;
    gzip_min_length 100;
    ssl_session_cache shared:tls:1m;
    ssl_certificate %[1]s/server.pem;
    ssl_certificate_key %[1]s/server-key.pem;
    ssl_client_certificate %[1]s/ca.pem;
    ssl_verify_client on;
    root %[1]s/www;
    default_type application/json;
    server {
        listen 127.0.0.1:%[2]d ssl http2;
        location = /old { return 301 /posts.json; }
    }
    server {
        listen 127.0.0.1:PORT2 ssl http2;
        keepalive_requests 10000;
        location = /old { return 301 /posts.json; }
    }`, "PORT2", fmt.Sprint(port2)))
	if err := os.WriteFile(filepath.Join(dir, "www", "posts.json"), []byte(doc.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	star := filepath.Join(dir, "tls.star")
	if err := os.WriteFile(star, []byte(`
def setup(user):
    if vars.get("login") == "yes":
        user.http.get("/posts.json", name="login")

def posts(user):
    r = user.http.get("/old", name="old")
    if r.protocol != vars.get("protocol", "HTTP/2.0"):
        fail("GET /old over " + r.protocol)
    if r.redirects != 1 or not r.json("ok") or len(r.json("posts")) != 201:
        fail("GET /old: %d after %d redirects: %s" % (r.status, r.redirects, r.text[:80]))
actions = [action("posts", posts)]
think_time = think.constant("100ms")
`), 0o644); err != nil {
		t.Fatal(err)
	}
	target := fmt.Sprintf("https://127.0.0.1:%d", port)
	logPath := filepath.Join(dir, "access.log")
	run := func(name string, args ...string) (*result.Result, []string) {
		t.Helper()
		if err := os.Truncate(logPath, 0); err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(dir, name)
		code, _, _, stderr := outcome(t, command(t, "", nil, append([]string{"run", star,
			"--duration", "2s", "--quiet", "--no-report", "--out", out}, args...)...))
		res, err := result.Read(out)
		if err != nil {
			t.Fatalf("%s: exit %d, %v\n%s", name, code, err, stderr)
		}
		return res, accessLines(t, logPath, target, keys)
	}
	byName := func(res *result.Result, name string) metrics.Summary {
		for _, s := range res.Requests {
			if s.Name == name {
				return s
			}
		}
		t.Fatalf("no request %q in %+v", name, res.Requests)
		return metrics.Summary{}
	}

	closed := []string{"--target", target, "--users", "3", "--ramp", "0s"}
	mine := []string{"--ca", keys.ca, "--cert", keys.clientCert, "--key", keys.clientKey}
	res, lines := run("default", append(append(closed, mine...), "--var", "login=yes")...)
	old := byName(res, "old")
	if old.Count < 10 || old.Errors != 0 || res.Totals.Errors != 0 {
		t.Fatalf("GET /old over TLS: %+v; totals %+v", old, res.Totals)
	}
	// Where the time went: every response waited for, the connections
	// made (a new one for each request: nginx ends one after two hops)
	// connected and shook hands; no name was resolved (an address).
	if ph := res.Phases; ph["wait"] == nil || ph["receive"] == nil || ph["connect"] == nil || ph["tls"] == nil || ph["dns"] != nil {
		t.Errorf("result.json's phases: %v; want wait, receive, connect and tls, no dns", ph)
	} else if w, c := ph["wait"].Totals, ph["tls"].Totals; w.Count != old.Count || c.Count < old.Count/2 || c.MeanMs <= 0 || w.P50Ms <= 0 {
		t.Errorf("phases: wait %+v, tls %+v; want a wait for each of the %d requests (its hops together), a handshake for most (nginx ends each connection after the two hops)", w, c, old.Count)
	}
	if old.HTTP2 != old.Count {
		t.Errorf("result.json: %d of %d responses over HTTP/2, want all", old.HTTP2, old.Count)
	}
	// The users' logins made their first connections: handshakes there.
	if st := res.Setup; st == nil || st.Phases["tls"] == nil || st.Phases["tls"].Totals.Count != 3 || st.Phases["wait"] == nil || st.Phases["wait"].Totals.Count != 3 {
		t.Errorf("result.json's setup: %+v; want the 3 logins' tls and wait phases", st)
	}
	if old.BodyIn < 10*old.BytesIn {
		t.Errorf("body_bytes_in %d, bytes_in %d: want the bodies read decoded, ~30 times what came gzipped", old.BodyIn, old.BytesIn)
	}
	resumed, gzipped, bodies := 0, 0, 0
	for _, l := range lines {
		f := strings.Fields(l) // protocol status uri client-dn reused encoding port:connection
		if len(f) != 7 || f[0] != "HTTP/2.0" || f[3] != "CN=user" || (f[2] != "/old" && f[2] != "/posts.json") {
			t.Fatalf("nginx logged %q: want HTTP/2.0 with the client certificate CN=user", l)
		}
		if f[4] == "r" {
			resumed++
		}
		if f[2] == "/posts.json" {
			bodies++
			if f[5] == "gzip" {
				gzipped++
			}
		}
	}
	// nginx closes a connection after its second request: each user's
	// first connection makes a full handshake, every later one resumes.
	if full := len(lines) - resumed; gzipped != bodies || int64(bodies) < old.Count || full < 3 || full > 3*2 {
		t.Errorf("nginx: %d lines, %d of %d bodies gzipped, %d requests on resumed sessions (want all but the 3 users' first connections' 2 each)",
			len(lines), gzipped, bodies, resumed)
	}

	res, lines = run("http1-full-handshakes", append(append(closed, mine...), "--http1", "--no-tls-resume", "--no-compression", "--var", "protocol=HTTP/1.1")...)
	old = byName(res, "old")
	if old.Count < 10 || res.Totals.Errors != 0 || old.BodyIn > old.BytesIn || old.HTTP2 != 0 {
		t.Errorf("--http1 --no-tls-resume --no-compression: %+v; want the bodies as they came, below bytes_in", old)
	}
	for _, l := range lines {
		if f := strings.Fields(l); len(f) != 7 || f[0] != "HTTP/1.1" || f[4] == "r" || f[5] == "gzip" {
			t.Fatalf("--http1 --no-tls-resume --no-compression: nginx logged %q: want HTTP/1.1, no resumed session, no gzip", l)
		}
	}

	// The open model's users over 2 shared connections, each many users'
	// streams: every request arrives, as HTTP/2, on 2 connections where
	// nginx keeps them; where it ends each after two requests (a GOAWAY),
	// each is replaced and no request is lost. 5 actions a second (10
	// requests), far below what 2 connections of 2 requests each carry
	// on a busy machine: at 40 a second, beside two busy loops, handshakes
	// fell behind, requests queued for 0.4 s and some were refused on
	// every new connection until their retries ran out.
	shared := []string{"--rate", "5/s", "--duration", "8s", "--max-users", "20", "--connections", "2"}
	for _, p := range []struct {
		port  int
		conns func(n int) bool
		want  string
	}{
		{port2, func(n int) bool { return n <= 2 }, "2 at most"},
		{port, func(n int) bool { return n >= 20 }, "one for every two requests, 20 or more"},
	} {
		res, lines = run(fmt.Sprintf("shared-%d", p.port), append(append(shared, mine...), "--target", fmt.Sprintf("https://127.0.0.1:%d", p.port))...)
		old = byName(res, "old")
		conns := map[string]bool{}
		for _, l := range lines {
			if f := strings.Fields(l); len(f) == 7 && f[0] == "HTTP/2.0" && (f[1] == "200" || f[1] == "301") {
				conns[f[6]] = true
			} else {
				t.Fatalf("--connections 2: nginx logged %q: want HTTP/2.0, 200 or 301", l)
			}
		}
		t.Logf("--connections 2 to nginx on port %d: %d actions, %d requests on %d connections", p.port, old.Count, len(lines), len(conns))
		if old.Count < 30 || res.Totals.Errors != 0 || old.HTTP2 != old.Count || int64(len(lines)) != 2*old.Count || !p.conns(len(conns)) {
			t.Errorf("--connections 2 to nginx on port %d: %+v, %d requests logged on %d connections; want 40 actions, all over HTTP/2, none failed, connections %s",
				p.port, old, len(lines), len(conns), p.want)
		}
	}

	res, _ = run("no-ca", append(closed, "--cert", keys.clientCert, "--key", keys.clientKey)...)
	if res.Totals.Errors == 0 || res.Totals.Errors != res.Totals.Count {
		t.Errorf("without --ca: %+v, want every request refused (unknown authority)", res.Totals)
	}
	if msgs := fmt.Sprint(byName(res, "old").Messages); !strings.Contains(msgs, "certificate") {
		t.Errorf("without --ca: errors %s, want a certificate error", msgs)
	}
}

// accessLines reads nginx's access log once it holds every request of a
// run that has ended: nginx writes a line after its response has gone, so
// a last request of our own (GET /end) is sent, and the log read when its
// line is there; that line is left out.
func accessLines(t *testing.T, path, target string, keys pki) []string {
	t.Helper()
	pair, err := tls.LoadX509KeyPair(keys.clientCert, keys.clientKey)
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true, Certificates: []tls.Certificate{pair}}}}
	defer client.CloseIdleConnections()
	resp, err := client.Get(target + "/end")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		if n := len(lines); strings.Contains(lines[n-1], " /end ") {
			return lines[:n-1]
		}
	}
	t.Fatalf("%s: no line for GET /end within 10 s", path)
	return nil
}

// TestNginxLimiterOverSharedHTTP2 loads a real token bucket (nginx's
// limit_req, 100 requests a second with a burst of 5, refused with 503)
// with the open model at half its rate, over 2 shared HTTP/2 connections
// that carry every user's streams (--connections): arrivals spread evenly
// pass, and a pool that held requests back and sent them together (a
// connection's setup, a stream limit) would meet 503s. Then at three times
// its rate, to show the bucket refuses what passes it.
func TestNginxLimiterOverSharedHTTP2(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	keys := makePKI(t, dir)
	port := freePort(t)
	startNginx(t, dir, port, `
    limit_req_zone $server_name zone=bucket:1m rate=100r/s;
    log_format limited '$status $limit_req_status $server_protocol $connection';
    access_log %[1]s/access.log limited;
    ssl_certificate %[1]s/server.pem;
    ssl_certificate_key %[1]s/server-key.pem;
    root %[1]s/www;
    default_type text/plain;
    server {
        listen 127.0.0.1:%[2]d ssl http2;
        server_name limited; # the bucket's key: an empty one is not limited
        # a static file: nginx's return would answer before limit_req runs
        location / { limit_req zone=bucket burst=5 nodelay; limit_req_status 503; try_files /ok.txt =404; }
    }`)
	if err := os.WriteFile(filepath.Join(dir, "www", "ok.txt"), []byte("ok\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	star := filepath.Join(dir, "limited.star")
	if err := os.WriteFile(star, []byte(`
def hit(user):
    user.http.get("/", name="GET /")
actions = [action("hit", hit)]
`), 0o644); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(dir, "access.log")
	run := func(rate, duration string) (metrics.Summary, map[string]int, map[string]bool) {
		t.Helper()
		if err := os.Truncate(logPath, 0); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		out := filepath.Join(dir, "rate-"+rate)
		code, _, _, stderr := outcome(t, command(t, "", nil, "run", star, "--target", fmt.Sprintf("https://127.0.0.1:%d", port), "--ca", keys.ca,
			"--rate", rate+"/s", "--max-users", "20", "--connections", "2", "--duration", duration, "--quiet", "--no-report", "--out", out))
		res, err := result.Read(out)
		if err != nil || len(res.Requests) != 1 {
			t.Fatalf("--rate %s/s: exit %d, %v\n%s", rate, code, err, stderr)
		}
		log, err := os.ReadFile(logPath)
		if err != nil {
			t.Fatal(err)
		}
		statuses, conns := map[string]int{}, map[string]bool{}
		for _, l := range strings.Split(strings.TrimSpace(string(log)), "\n") {
			f := strings.Fields(l) // status limit_req_status protocol connection
			if len(f) != 4 || f[2] != "HTTP/2.0" {
				t.Fatalf("--rate %s/s: nginx logged %q: want an HTTP/2.0 request", rate, l)
			}
			statuses[f[0]]++
			conns[f[3]] = true
		}
		return res.Requests[0], statuses, conns
	}

	// Half the bucket's rate for 8 s: 400 arrivals, 20 ms apart.
	got, statuses, conns := run("50", "8s")
	t.Logf("50/s: %d requests, %d failed; nginx: %v on %d connections", got.Count, got.Errors, statuses, len(conns))
	if got.Count < 380 || statuses["200"] < 380 || len(conns) > 2 {
		t.Errorf("50/s over 2 shared connections: %d requests, nginx %v on %d connections; want ~400 answered, on 2 connections at most",
			got.Count, statuses, len(conns))
	}
	if refused := statuses["503"]; refused > 4 || got.Errors > 4 {
		t.Errorf("50/s, half the bucket's rate: nginx refused %d, headroom counted %d failed; want 1%% at most: arrivals sent together", refused, got.Errors)
	}
	// Three times its rate: the bucket refuses two in three.
	got, statuses, _ = run("300", "2s")
	t.Logf("300/s: %d requests, %d failed; nginx: %v", got.Count, got.Errors, statuses)
	// (nginx logs a request after its response: the last lines may come
	// after headroom has read its answers.)
	if n := statuses["200"] + statuses["503"]; n < 500 || statuses["503"] < n/2 || got.Errors < int64(statuses["503"]) || got.Errors > int64(statuses["503"])+2 {
		t.Errorf("300/s, three times the bucket's rate: nginx %v, headroom %d failed; want most of ~600 refused, each counted failed", statuses, got.Errors)
	}
}
