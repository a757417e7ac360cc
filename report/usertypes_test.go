package report

import (
	"strings"
	"testing"

	"github.com/headroom-dev/headroom/result"
)

// rowsByFirstCell reads a Markdown document's table rows by their first
// cell, each cell trimmed.
func rowsByFirstCell(md string) map[string][]string {
	rows := map[string][]string{}
	for _, line := range strings.Split(md, "\n") {
		if !strings.HasPrefix(line, "|") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "| "), "|")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		rows[cells[0]] = cells
	}
	return rows
}

func TestUserTypesAreShown(t *testing.T) {
	r := fixture(t, "base-1")
	md := string(Markdown(ForResult(r)))
	if rows := rowsByFirstCell(md); strings.Contains(md, "User types") || strings.Join(rows["actions (weight)"], "|") != "actions (weight)|Posts 3, View 1" {
		t.Errorf("a scenario of one type: the setup table should list its actions, and no user types:\n%s", md)
	}
	r.Config.Think, r.Config.Actions = "", nil
	r.Config.UserTypes = []result.UserType{
		{Name: "reader", Weight: 9, Think: `think.constant("1s")`, Actions: []result.ActionWeight{{Name: "View", Weight: 3}, {Name: "Posts", Weight: 1}}},
		{Name: "poster", Weight: 1, Think: `think.constant("5s")`, Actions: []result.ActionWeight{{Name: "Posts", Weight: 1}}},
	}
	r.UsersByType = map[string]int{"reader": 9, "poster": 1}
	md = string(Markdown(ForResult(r)))
	mustContain(t, md, "### User types")
	rows := rowsByFirstCell(md)
	for name, want := range map[string]string{
		"user types":       "2, below",
		"actions (weight)": "",
		"reader":           `9 9 View 3, Posts 1 think.constant("1s")`,
		"poster":           `1 1 Posts 1 think.constant("5s")`,
	} {
		got := ""
		if rows[name] != nil {
			got = strings.Join(rows[name][1:], " ")
		}
		if got != want {
			t.Errorf("row %s: %q, want %q", name, got, want)
		}
	}
}
