package agents

import (
	"math"
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
		"correct horse battery staple",     // 28 characters of a 95-character alphabet is 184 bits: but few distinct, repeated letters
		"correcthorsebatterystaple",        // 25 lowercase letters: 118 bits (once counted as base64's 150)
		"31415926535897932384626433832795", // 32 digits: 106 bits
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
	for _, ok := range []string{"q3V9xZr1LkP0aB7mN2cD8e", "Zq8/fK2+Lm9xPq1Rt5Vw3A==", // base64 of 16 bytes
		"k7q2mx9wzp4tr8vn3hs6jc5bf1gd0lye", // 32 of lowercase and digits: 165 bits
	} {
		if err := CheckToken([]byte(ok)); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	if err := CheckToken([]byte("0123456789abcdef0123")); err == nil || !strings.Contains(err.Error(), "80 bits") {
		t.Errorf("20 hex characters: %v, want refused as 80 bits", err)
	}
}

// What a random generator made is not refused for chance patterns: the
// 128-bit hex token that failed this test once (eleven 8s of 32: one
// random token in 30,000 has a character that often) passes; the chances
// the rules weigh are the exact ones.
func TestCheckTokenIsNotFooledByChance(t *testing.T) {
	for _, tok := range []string{"9a4f98165882d889594806815b3f8888"} {
		if err := CheckToken([]byte(tok)); err != nil {
			t.Errorf("%s: %v", tok, err)
		}
	}
	near := func(got, want float64) bool { return math.Abs(got-want) <= 1e-6*want }
	if got := 16 * atLeast(32, 11, 1.0/16); !near(got, 3.4188011202563256e-05) {
		t.Errorf("a hex character 11 times or more of 32: %g, want 3.4188e-05", got)
	}
	if got := fewDistinct(32, 7, 16); !near(got, 3.5457690796907515e-08) {
		t.Errorf("7 or fewer distinct of 32 hex characters: %g, want 3.5458e-08", got)
	}
}
