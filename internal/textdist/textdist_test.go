package textdist

import "testing"

func TestLevenshtein(t *testing.T) {
	for _, c := range []struct {
		a, b  string
		limit int
		want  int
	}{
		{"", "", -1, 0},
		{"kitten", "sitting", -1, 3},
		{"setup", "setpu", -1, 2},
		{"synapse_http_server_response_time_seconds", "synapse_http_server_respnse_time_seconds", 3, 1},
		{"a", "abcdefgh", 3, 4}, // lengths alone differ by more than the limit
		{"abc", "xyz", 5, 3},
	} {
		if got := Levenshtein(c.a, c.b, c.limit); got != c.want {
			t.Errorf("Levenshtein(%q, %q, %d) = %d, want %d", c.a, c.b, c.limit, got, c.want)
		}
	}
}
