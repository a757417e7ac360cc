package ws

import (
	"testing"
	"time"
)

func TestDeliveryStampsAreFoundInText(t *testing.T) {
	at := time.Unix(1700000000, 123456789)
	for text, ok := range map[string]bool{
		"hr-stamp-1700000000123456789":                           true,
		`{"message":"hello hr-stamp-1700000000123456789 there"}`: true,
		"hr-stamp-x hr-stamp-1700000000123456789":                true,
		"hr-stamp-": false,
		"nothing":   false,
	} {
		got, found := findStamp(text)
		if found != ok || (ok && !got.Equal(at)) {
			t.Errorf("findStamp(%q) = %v, %v; want %v", text, got, found, ok)
		}
	}
}
