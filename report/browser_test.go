//go:build linux

package report

import (
	"bytes"
	"context"
	"fmt"
	"image/color"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/headroom-dev/headroom/internal/testing/servertest"
)

// chromiumBin is Debian's chromium, which scripts/test.sh installs.
const chromiumBin = "/usr/bin/chromium"

// TestHTMLInChromium opens the written report.html in a real headless
// Chromium, as a reader would: the page must load with no console message
// (a blocked external load or a script error would log one), and the
// screenshot must show the charts, in their series' colours.
func TestHTMLInChromium(t *testing.T) {
	servertest.Require(t, chromiumBin, "chromium")
	for name, d := range browserDocs(t) {
		t.Run(name, func(t *testing.T) { checkScreenshot(t, d) })
	}
}

// browserDocs are the pages the browser tests open: the renderer's test
// document, and real reports built from the result fixtures.
func browserDocs(t *testing.T) map[string]*Doc {
	return map[string]*Doc{"test-doc": testDoc(), "comparison": fixtureComparison(t), "ceiling": ForResult(fixture(t, "ceil-1")),
		"step": ForResult(fixture(t, "step-1"))}
}

func checkScreenshot(t *testing.T, d *Doc) {
	path, err := WriteHTML(t.TempDir(), d)
	if err != nil {
		t.Fatal(err)
	}

	shot := filepath.Join(t.TempDir(), "page.png")
	// Tall enough for every chart of a long report.
	_, logs := runChromium(t, fmt.Sprintf("--window-size=1200,%d", 1500+700*len(charts(d))), "--screenshot="+shot, "file://"+path)
	checkConsole(t, logs)
	data, err := os.ReadFile(shot)
	if err != nil {
		t.Fatalf("no screenshot: %v\n%s", err, logs)
	}
	img, err := png.Decode(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	white := color.RGBA{0xff, 0xff, 0xff, 0xff}
	if n := countPixels(img, func(p color.RGBA) bool { return p != white }); n < 20000 {
		t.Errorf("screenshot: only %d pixels are not white", n)
	}
	// Only the charts use the palette, so its colours on the screen are
	// the charts' lines drawn by the browser.
	lines := 0
	for _, c := range charts(d) {
		lines = max(lines, len(c.Series))
	}
	for i, name := range []string{"blue", "vermillion", "green"}[:min(3, lines)] {
		if n := countPixels(img, near(seriesColor(i))); n < 300 {
			t.Errorf("screenshot: %d pixels of the %s series colour, want the charts' lines", n, name)
		}
	}
	distinct := map[color.RGBA]bool{}
	countPixels(img, func(p color.RGBA) bool {
		distinct[color.RGBA{p.R &^ 0x1f, p.G &^ 0x1f, p.B &^ 0x1f, 0}] = true
		return false
	})
	if len(distinct) < 10 {
		t.Errorf("screenshot has %d distinct colours, want a page with charts", len(distinct))
	}
	if t.Failed() {
		keep := filepath.Join(os.TempDir(), strings.ReplaceAll(t.Name(), "/", "-")+".png")
		_ = os.WriteFile(keep, data, 0o644)
		t.Logf("screenshot kept in %s", keep)
	}
}

// TestHTMLChartsDecode checks, in Chromium, that every chart image was
// decoded to its full size. The page itself has no script, so the test
// loads a copy with one that writes each image's natural size into the
// DOM, and reads it back with --dump-dom.
func TestHTMLChartsDecode(t *testing.T) {
	servertest.Require(t, chromiumBin, "chromium")
	for name, d := range browserDocs(t) {
		t.Run(name, func(t *testing.T) { checkDecode(t, d) })
	}
}

func checkDecode(t *testing.T, d *Doc) {
	page, err := HTML(d)
	if err != nil {
		t.Fatal(err)
	}
	const csp = "default-src 'none';"
	if !bytes.Contains(page, []byte(csp)) {
		t.Fatalf("the page lacks its Content-Security-Policy %q", csp)
	}
	// The copy allows inline scripts and nothing else: images must still
	// come from data: URIs.
	page = bytes.Replace(page, []byte(csp), []byte(csp+" script-src 'unsafe-inline';"), 1)
	const probe = `<script>addEventListener("load", () => {
  document.body.dataset.images = Array.from(document.images,
    i => (i.complete ? "ok:" : "incomplete:") + i.naturalWidth + "x" + i.naturalHeight).join(" ");
});</script>`
	page = bytes.Replace(page, []byte("</body>"), []byte(probe+"</body>"), 1)
	path := filepath.Join(t.TempDir(), "probe.html")
	if err := os.WriteFile(path, page, 0o644); err != nil {
		t.Fatal(err)
	}

	dom, logs := runChromium(t, "--dump-dom", "file://"+path)
	checkConsole(t, logs)
	m := regexp.MustCompile(`data-images="([^"]*)"`).FindSubmatch(dom)
	if m == nil {
		t.Fatalf("the probe wrote nothing into the DOM:\n%.2000s\n%s", dom, logs)
	}
	got := strings.Fields(string(m[1]))
	if len(got) != len(charts(d)) {
		t.Fatalf("%d images in the page, want %d: %q", len(got), len(charts(d)), got)
	}
	for i, g := range got {
		if g != "ok:900x400" {
			t.Errorf("chart %s: %s, want ok:900x400", charts(d)[i].Name, g)
		}
	}
}

// runChromium runs headless Chromium on its own profile with args and
// returns its standard output and its log. A slow shared machine gets two
// minutes; past that the whole process group is killed.
func runChromium(t *testing.T, args ...string) (stdout, logs []byte) {
	t.Helper()
	home := t.TempDir()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, chromiumBin, append([]string{
		"--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--no-first-run", "--no-default-browser-check", "--hide-scrollbars", "--mute-audio",
		"--user-data-dir=" + filepath.Join(home, "profile"),
		"--enable-logging=stderr", "--v=0",
	}, args...)...)
	cmd.Env = append(os.Environ(), "HOME="+home, "XDG_CONFIG_HOME="+home, "XDG_CACHE_HOME="+home)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	start := time.Now()
	err := cmd.Run()
	if cmd.Process != nil {
		// Helpers Chromium left behind are in its group; the profile
		// directory can then be removed.
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
	if ctx.Err() != nil {
		t.Fatalf("chromium did not finish within %v; its log:\n%s", time.Since(start).Round(time.Second), errb.Bytes())
	}
	if err != nil {
		t.Fatalf("chromium: %v; its log:\n%s", err, errb.Bytes())
	}
	return out.Bytes(), errb.Bytes()
}

// checkConsole fails the test for every message the page logged to the
// console: script errors, and loads the Content-Security-Policy blocked.
func checkConsole(t *testing.T, logs []byte) {
	t.Helper()
	for _, line := range strings.Split(string(logs), "\n") {
		if strings.Contains(line, ":CONSOLE") || strings.Contains(line, "Uncaught") {
			t.Errorf("console: %s", line)
		}
	}
}
