package report

import (
	"strings"
	"testing"
)

func TestActionsWithoutRequestsAreMarked(t *testing.T) {
	r := fixture(t, "base-1")
	plain := string(Markdown(ForResult(r)))
	if strings.Contains(plain, "no request") {
		t.Error("a run whose actions all sent requests shows a no-request column")
	}
	view := -1
	for i, a := range r.Actions {
		if a.Name == "View" {
			view = i
		}
	}
	if view < 0 {
		t.Fatal("fixture base-1 has no action View")
	}
	r.Actions[view].NoRequest = 5
	md := string(Markdown(ForResult(r)))
	mustContain(t, md, "| no request |", NoRequestNote)
	last := map[string]string{} // action -> its row's last cell
	for _, line := range strings.Split(md, "\n") {
		cells := strings.Split(strings.Trim(line, "| "), "|")
		last[strings.TrimSpace(cells[0])] = strings.TrimSpace(cells[len(cells)-1])
	}
	if last["View"] != "5" || last["Posts"] != "0" {
		t.Errorf("no-request cells: View %q, Posts %q; want 5 and 0", last["View"], last["Posts"])
	}
	html, err := HTML(ForResult(r))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(html), "no request") {
		t.Error("the HTML report lacks the no-request column")
	}
}
