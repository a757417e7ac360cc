package cli

import (
	"context"
	"flag"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/headroom-dev/headroom/metrics"
	"github.com/headroom-dev/headroom/remotewrite"
	"github.com/headroom-dev/headroom/runner"
)

// remoteWriteFlags are --out-remote-write and --remote-write-label.
type remoteWriteFlags struct {
	raw    string
	labels multi
	to     *url.URL
	extra  map[string]string
}

func (r *remoteWriteFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&r.raw, "out-remote-write", "", `send the run's series (the names --metrics-listen serves, labelled job="headroom", instance=<this host>, run=<the result directory's name>) to a Prometheus remote-write receiver every second as the run goes, e.g. http://127.0.0.1:9090/api/v1/write (a Prometheus started with --web.enable-remote-write-receiver); user:password@ in it is basic auth; what the receiver cannot take now is sent again (200,000 samples held at most), the last second's when the run ends (docs/REMOTE-WRITE.md)`)
	fs.Var(&r.labels, "remote-write-label", "a label NAME=VALUE added to every series --out-remote-write sends (repeatable), e.g. --remote-write-label build=v2")
}

var labelName = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)

// check parses the flags; nothing is sent yet.
func (r *remoteWriteFlags) check() error {
	if r.raw == "" {
		if len(r.labels) > 0 {
			return fmt.Errorf("--remote-write-label labels what --out-remote-write sends: give --out-remote-write too")
		}
		return nil
	}
	u, err := url.Parse(r.raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("--out-remote-write %q is not an http(s) URL; write e.g. http://127.0.0.1:9090/api/v1/write", runner.Redact(r.raw))
	}
	r.to, r.extra = u, map[string]string{}
	for _, l := range r.labels {
		k, v, ok := strings.Cut(l, "=")
		if !ok || !labelName.MatchString(k) || strings.HasPrefix(k, "__") {
			return fmt.Errorf("--remote-write-label %q: want NAME=VALUE, NAME letters, digits and _ (not starting with a digit or __)", l)
		}
		r.extra[k] = v
	}
	return nil
}

// start sends c.Prom's series (made if the run has none yet) until the
// returned stop, which sends the last and says what was sent.
func (r *remoteWriteFlags) start(env Env, c *runner.Common) (stop func()) {
	if r.to == nil {
		return func() {}
	}
	if c.Prom == nil {
		c.Prom = metrics.NewProm()
	}
	labels := map[string]string{"job": "headroom", "run": filepath.Base(c.Out)}
	if host, err := os.Hostname(); err == nil {
		labels["instance"] = host
	}
	for k, v := range r.extra {
		labels[k] = v
	}
	w := &remotewrite.Writer{URL: r.to, Gather: c.Prom.Gather, Labels: labels,
		Warn: func(s string) { fmt.Fprintln(env.Stderr, "warning: "+s) }}
	where := r.to.Redacted()
	fmt.Fprintf(env.Stderr, "remote write to %s, run=%q\n", where, labels["run"])
	if host := r.to.Hostname(); r.to.Scheme == "http" && !loopbackHost(host) {
		fmt.Fprintf(env.Stderr, "warning: --out-remote-write sends the run's series (request names, rates, latencies) to %s in clear: use https:// off this machine\n", host)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { w.Run(ctx); close(done) }()
	return func() {
		cancel()
		<-done
		st := w.Stats()
		msg := fmt.Sprintf("remote write: %d samples sent to %s in %d requests", st.Sent, where, st.Requests)
		if st.Dropped > 0 || st.Pending > 0 {
			msg += fmt.Sprintf("; %d dropped, %d not sent (%s)", st.Dropped, st.Pending, st.LastErr)
		}
		fmt.Fprintln(env.Stderr, msg)
	}
}
