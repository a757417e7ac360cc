package agents

import (
	"strings"
	"testing"
)

// Weak tokens are refused, saying how to make one; what generators make
// passes, every time.
func TestCheckToken(t *testing.T) {
	for _, weak := range []string{
		"aaaaaaaaaaaaaaaa", strings.Repeat("a", 64), "0123456789abcdef", "0123456789abcdef0123456789abcdef",
		"abcdefghijklmnopqrstuvwxyz0123456789", "password1234567890", "s3cret", strings.Repeat("Xy7!", 10),
		"deadbeefdeadbeefdeadbeefdeadbeef", "3f9a2c", // 24 bits of hex
		"correct horse battery staple", // 28 characters of a 95-character alphabet is 184 bits: but few distinct, repeated letters
	} {
		err := CheckToken([]byte(weak))
		if err == nil || !strings.Contains(err.Error(), "openssl rand -hex 32") {
			t.Errorf("%q: %v, want refused with how to make a token", weak, err)
		}
	}
	for range 2000 {
		tok := MakeToken()
		if err := CheckToken([]byte(tok)); err != nil {
			t.Fatalf("a made token %s: %v", tok, err)
		}
		if err := CheckToken([]byte(tok[:32])); err != nil { // openssl rand -hex 16: 128 bits
			t.Fatalf("128 bits of hex %s: %v", tok[:32], err)
		}
	}
	for _, ok := range []string{"q3V9xZr1LkP0aB7mN2cD8e", "Zq8/fK2+Lm9xPq1Rt5Vw3A=="} { // base64 of 16 bytes
		if err := CheckToken([]byte(ok)); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	if err := CheckToken([]byte("0123456789abcdef0123")); err == nil || !strings.Contains(err.Error(), "80 bits") {
		t.Errorf("20 hex characters: %v, want refused as 80 bits", err)
	}
}
