package har

import (
	"bytes"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// write is the scenario's source: a header saying what was converted and
// found, a function a page, and the action that plays them in order.
func write(l *Log, kept []Entry, reqs []*request, opt Options, sc *Scenario) []byte {
	var b bytes.Buffer
	src := or(filepath.Base(opt.Source), "a HAR file")
	fmt.Fprintf(&b, "# Converted by `headroom convert` from %s: %d requests to %s, by page, in the order recorded.\n", src, len(reqs), sc.Origin)
	if sc.Assets > 0 || len(sc.Elsewhere) > 0 {
		fmt.Fprintf(&b, "# Left out: %d static assets (scripts, styles, images, fonts: --static keeps them)", sc.Assets)
		if len(sc.Elsewhere) > 0 {
			fmt.Fprintf(&b, "; requests to other origins: %s", strings.Join(sc.Elsewhere, ", "))
		}
		b.WriteString(".\n")
	}
	b.WriteString("#\n# Correlations: values a response gave and a later request sent, taken from that response as the\n# scenario runs (a recorded token or id would be stale on a fresh server):\n")
	for _, c := range sc.Correlations {
		fmt.Fprintf(&b, "#   %s\n", c)
	}
	if len(sc.Correlations) == 0 {
		b.WriteString("#   none found\n")
	}
	if len(sc.Uncorrelated) > 0 {
		b.WriteString("# Not correlated: sent as recorded, though they look made for the session (no response before\n# them gave them: the client's own, or made by its scripts). Look at these:\n")
		for _, u := range sc.Uncorrelated {
			fmt.Fprintf(&b, "#   %s\n", u)
		}
	}
	fmt.Fprintf(&b, "#\n#   headroom run %s --target %s --users 10 --duration 1m\n\n", strings.TrimSuffix(src, filepath.Ext(src))+".star", sc.Origin)

	titles := map[string]string{}
	for _, p := range l.Pages {
		titles[p.ID] = p.Title
	}
	var pages []string
	for i := 0; i < len(reqs); {
		j := i
		for j < len(reqs) && kept[j].PageRef == kept[i].PageRef {
			j++
		}
		name := fmt.Sprintf("page_%d", len(pages)+1)
		pages = append(pages, name)
		fmt.Fprintf(&b, "def %s(user):\n", name)
		if t := titles[kept[i].PageRef]; t != "" {
			fmt.Fprintf(&b, "    # %s\n", oneLine(t))
		}
		for _, r := range reqs[i:j] {
			writeRequest(&b, r)
		}
		b.WriteString("\n")
		i = j
	}
	fmt.Fprintf(&b, "PAGES = [%s]\n\n", strings.Join(pages, ", "))
	if slices.ContainsFunc(reqs, func(r *request) bool {
		return slices.ContainsFunc(r.sources, func(s *source) bool { return s.tag != "" })
	}) {
		b.WriteString(htmlValue)
	}
	b.WriteString(`def session(user):
    # The pages in the order recorded, one each action: the pauses between them are think_time.
    i = user.state.get("page", 0)
    PAGES[i](user)
    user.state["page"] = (i + 1) % len(PAGES)

actions = [action("Session", session)]
`)
	b.WriteString(thinkTime(pauses(l, kept)) + "\n")
	return b.Bytes()
}

// writeRequest writes one request, and the values later ones take from
// its response.
func writeRequest(b *bytes.Buffer, r *request) {
	method := strings.ToLower(r.e.Request.Method)
	call := "user.http." + method + "(" + expr(r.url)
	if !slices.Contains([]string{"get", "head", "post", "put", "patch", "delete"}, method) {
		call = "user.http.request(" + quote(r.e.Request.Method) + ", " + expr(r.url)
	}
	args := []string{call, "name=" + quote(r.name)}
	if len(r.headers) > 0 {
		var hs []string
		for _, h := range r.headers {
			hs = append(hs, quote(h.name)+": "+expr(h.val))
		}
		args = append(args, "headers={"+strings.Join(hs, ", ")+"}")
	}
	if r.json != nil {
		var v bytes.Buffer
		value(r.json, &v)
		args = append(args, "json="+v.String())
	} else if r.body != nil {
		args = append(args, "body="+expr(r.body))
	}
	if r.status >= 400 || r.redirect {
		args = append(args, fmt.Sprintf("expect=[%d]", r.status)) // as recorded
	}
	if r.redirect {
		args = append(args, "redirect=False") // the next request asks for where it leads, as recorded
	}
	lhs := "    "
	if len(r.sources) > 0 {
		lhs += "r = "
	}
	b.WriteString(lhs + strings.Join(args, ", ") + ")\n")
	for _, s := range r.sources {
		if s.header != "" {
			fmt.Fprintf(b, "    user.state[%q] = r.headers[%q]\n", s.name, s.header)
		} else if s.tag != "" {
			fmt.Fprintf(b, "    user.state[%q] = html_value(r.text, %q, %q)\n", s.name, s.tag, s.field)
		} else {
			fmt.Fprintf(b, "    user.state[%q] = r.json(%q)\n", s.name, s.path)
		}
	}
}

// thinkTime is the recording's pauses as think_time: uniform over their
// range, or one second for a session of one page.
func thinkTime(ps []time.Duration) string {
	if len(ps) == 0 {
		return `think_time = think.constant("1s")  # one page: no pause recorded`
	}
	lo, hi := slices.Min(ps), slices.Max(ps)
	d := func(t time.Duration) string { return quote(t.Round(100 * time.Millisecond).String()) }
	if hi-lo < 100*time.Millisecond {
		return fmt.Sprintf("think_time = think.constant(%s)  # the recording's pauses between pages", d(hi))
	}
	return fmt.Sprintf("think_time = think.uniform(%s, %s)  # the recording's pauses between pages", d(lo), d(hi))
}

func oneLine(s string) string {
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, s)
	if r := []rune(s); len(r) > 100 {
		s = string(r[:100]) + "…"
	}
	return s
}

// htmlValue is the scenario's function that takes a value from a page as
// it runs: an input's value or a meta tag's content, found by the
// element's name, its attributes in double or single quotes.
const htmlValue = `def html_value(page, tag, name):
    # The value of the page's <input name=NAME> (the content of <meta name=NAME>): this session's.
    attr = "content" if tag == "meta" else "value"
    for q in ['"', "'"]:
        at = page.find("name=" + q + name + q)
        if at < 0:
            continue
        element = page[page.rfind("<", 0, at):page.find(">", at)]
        for vq in ['"', "'"]:
            i = element.find(attr + "=" + vq)
            if i >= 0:
                i += len(attr) + 2
                return element[i:element.find(vq, i)]
    fail("the page has no <%s name=%s> with its %s" % (tag, name, attr))

`
