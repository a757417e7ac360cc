package agents

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"math"
	"strings"
)

// MinTokenBits is the least a token must carry, by CheckToken's estimate:
// a token that anyone who saw a handshake could guess offline (the proofs
// are HMACs of it) is no secret.
const MinTokenBits = 128

// MakeToken is a new token of 256 random bits, as hex.
func MakeToken() string {
	b := make([]byte, 32)
	rand.Read(b) // never fails (crypto/rand)
	return hex.EncodeToString(b)
}

// CheckToken refuses a token that cannot carry MinTokenBits: too short
// for its alphabet (hex 4 bits a character, base64 6; other text what its
// characters' frequencies carry, at most 6.5: words are far from random),
// or clearly not random (a few characters repeated, one character a third
// of it, a sequence like 0123… or abcd…, a shorter token repeated). It
// cannot prove a token random; it refuses what no random generator makes.
func CheckToken(t []byte) error {
	s := string(t)
	const how = "make one with: openssl rand -hex 32 > token (or let the coordinator write it: --token-file names a file that does not exist yet)"
	bits := float64(len(s)) * alphabetBits(s)
	if bits < MinTokenBits {
		return fmt.Errorf("the token is %d characters, about %.0f bits; a token needs %d bits or more: %s", len(s), bits, MinTokenBits, how)
	}
	if why := patterned(s); why != "" {
		return fmt.Errorf("the token is not random (%s): %s", why, how)
	}
	return nil
}

// alphabetBits is what one character of s can carry, by its alphabet.
func alphabetBits(s string) float64 {
	hexOnly, b64 := true, true
	for _, c := range s {
		isDigit, isLetter := '0' <= c && c <= '9', 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
		if !isDigit && !('a' <= c && c <= 'f') && !('A' <= c && c <= 'F') {
			hexOnly = false
		}
		if !isDigit && !isLetter && !strings.ContainsRune("+/=_-", c) {
			b64 = false
		}
	}
	switch {
	case hexOnly:
		return 4
	case b64:
		return 6
	}
	count := map[rune]float64{}
	for _, c := range s {
		count[c]++
	}
	h := 0.0 // the Shannon entropy of s's characters, in bits
	for _, n := range count {
		p := n / float64(len(s))
		h -= p * math.Log2(p)
	}
	return min(h, math.Log2(95))
}

// patterned says how s is clearly not random; "" when it is not.
func patterned(s string) string {
	count := map[rune]int{}
	for _, c := range s {
		count[c]++
	}
	most := 0
	for _, n := range count {
		most = max(most, n)
	}
	steps := 0 // places where the character follows on as the one before did: 0123, aaaa, abab
	for i := 2; i < len(s); i++ {
		if int(s[i])-int(s[i-1]) == int(s[i-1])-int(s[i-2]) || s[i] == s[i-2] {
			steps++
		}
	}
	for p := 1; p <= len(s)/2; p++ {
		if strings.Repeat(s[:p], len(s)/p+1)[:len(s)] == s {
			return fmt.Sprintf("%q repeated", s[:p])
		}
	}
	switch {
	case len(count) < 8:
		return fmt.Sprintf("%d distinct characters", len(count))
	case 3*most > len(s):
		return "one character a third of it"
	case 3*steps > len(s):
		return "runs like 0123 or abab"
	}
	return ""
}
