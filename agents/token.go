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
// or clearly not random (a few characters repeated, one character far too
// often, a sequence like 0123… or abcd…, a shorter token repeated: what a
// random generator makes less than once in a trillion tokens). It cannot
// prove a token random; it refuses what no random generator makes.
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

// alphabetBits is what one character of s can carry, by the smallest
// alphabet a generator of its kind draws from (see alphabetSize); for
// other text, what its characters' frequencies carry, at most that of the
// 95 printable characters: words are far from random.
func alphabetBits(s string) float64 {
	if a := alphabetSize(s); a < 95 {
		return math.Log2(a)
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

// improbable is how rarely a random generator makes what patterned
// refuses: once in a trillion tokens. A rule by a fixed share (a third of
// the characters one character, or runs) refused one random 32-character
// hex token in about 20,000 (15 of 300,000 drawn), a user's real token
// among them.
const improbable = 1e-12

// patterned says how s is clearly not random ("" when it is not): what a
// random generator of s's alphabet makes less often than improbable, by
// the binomial tail of s's most common character and of its runs, and
// the chance of so few distinct characters; or a shorter token repeated.
func patterned(s string) string {
	n, a := len(s), alphabetSize(s)
	count := map[rune]int{}
	for _, c := range s {
		count[c]++
	}
	most := 0
	for _, k := range count {
		most = max(most, k)
	}
	steps := 0 // places where the character follows on as the one before did: 0123, aaaa, abab
	for i := 2; i < n; i++ {
		if int(s[i])-int(s[i-1]) == int(s[i-1])-int(s[i-2]) || s[i] == s[i-2] {
			steps++
		}
	}
	for p := 1; p <= n/2; p++ {
		if strings.Repeat(s[:p], n/p+1)[:n] == s {
			return fmt.Sprintf("%q repeated", s[:p])
		}
	}
	switch {
	case fewDistinct(n, len(count), a) < improbable:
		return fmt.Sprintf("%d distinct characters", len(count))
	case a*atLeast(n, most, 1/a) < improbable:
		return fmt.Sprintf("one character %d times of %d", most, n)
	case n > 2 && atLeast(n-2, steps, 2/a) < improbable:
		return "runs like 0123 or abab"
	}
	return ""
}

// alphabetSize is how many characters a generator of s's kind draws
// from, the smallest that holds s: digits 10, hex 16 (one case), letters
// of one case 26, with digits 36, of both cases 52, with digits 62,
// base64 64 (its "+/=" or "-_"), else the 95 printable ASCII characters.
// "correcthorsebatterystaple" is 25 characters of 26: 118 bits, not the
// 150 of base64 it was once counted as.
func alphabetSize(s string) float64 {
	digit, lower, upper, b64, hexOnly := false, false, false, false, true
	for _, c := range s {
		switch {
		case '0' <= c && c <= '9':
			digit = true
		case 'a' <= c && c <= 'z':
			lower, hexOnly = true, hexOnly && c <= 'f'
		case 'A' <= c && c <= 'Z':
			upper, hexOnly = true, hexOnly && c <= 'F'
		case strings.ContainsRune("+/=_-", c):
			b64 = true
		default:
			return 95
		}
	}
	switch {
	case b64:
		return 64
	case !lower && !upper:
		return 10
	case hexOnly && lower != upper:
		return 16
	}
	a := 0.0
	for _, in := range []struct {
		has  bool
		size float64
	}{{digit, 10}, {lower, 26}, {upper, 26}} {
		if in.has {
			a += in.size
		}
	}
	return a
}

// atLeast is the chance of k or more successes in n trials of chance p.
func atLeast(n, k int, p float64) float64 {
	sum := 0.0
	for i := k; i <= n; i++ {
		lc, _ := math.Lgamma(float64(n + 1))
		li, _ := math.Lgamma(float64(i + 1))
		lr, _ := math.Lgamma(float64(n - i + 1))
		sum += math.Exp(lc - li - lr + float64(i)*math.Log(p) + float64(n-i)*math.Log1p(-p))
	}
	return sum
}

// fewDistinct is the chance that n characters drawn from a alphabet
// show at most d distinct ones.
func fewDistinct(n, d int, a float64) float64 {
	dp := make([]float64, d+2) // dp[j]: the chance of j distinct so far
	dp[0] = 1
	for range n {
		for j := d + 1; j >= 1; j-- {
			dp[j] = dp[j]*float64(j)/a + dp[j-1]*(a-float64(j-1))/a
		}
		dp[0] = 0
	}
	sum := 0.0
	for _, p := range dp[:d+1] {
		sum += p
	}
	return sum
}
