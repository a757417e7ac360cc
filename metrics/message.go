package metrics

import (
	"math"
	"strconv"
	"strings"
	"time"
)

// Error messages are counted by kind, not by text: the parts of a message
// that vary from one occurrence to the next without changing what went
// wrong are taken out of its text, and the kind keeps the range of each.
// These parts are:
//
//   - a duration, as Go writes one ("timeout after 10.102s", "1m2.5s"),
//     kept as its range and shown as "timeout after 10.1s–10.4s";
//   - a count of bytes or a place in bytes ("response body of 70123456
//     bytes ...", "(at byte 12)", "at offset 12" of a body that is not
//     JSON), kept as its range;
//   - the local port of a connection in a network error
//     ("read tcp 127.0.0.1:53422->10.0.0.1:80: ..."), shown as "*": it is
//     a new one on every connection and says nothing;
//   - an identifier: a word of 16 or more letters, digits, '-' and '_'
//     with both a letter and a digit in it (a request id a server puts in
//     each error, a UUID, a token), shown as "<id>": with it, every
//     message of a server's one error would be a kind of its own, and the
//     kinds past the first 20 would all be "other".
//
// Everything else stays as written: a status ("status 503"), a line of
// the scenario ("chat.star:42: ..."), a limit. Counts are exact.

// MaxParts is how many varying parts of one message are taken out; the
// numbers after them stay in its text.
const MaxParts = 4

// MessageKind is one kind of error message: how many times it happened
// and the range of each part taken out of its text.
type MessageKind struct {
	Count int64
	n     uint8              // parts in use
	parts [MaxParts][2]int64 // lowest and highest value of each part: nanoseconds or bytes
}

// Placeholders in a kind's key. The key is the message's text with each
// part replaced by one of these, which no message holds.
const (
	durationPart = "\x00d"
	bytesPart    = "\x00b" // a count or place in bytes
	idPart       = "<id>"  // an identifier; no range kept, so shown as written
)

// add counts one message of this kind whose parts had the values v.
func (k *MessageKind) add(n int64, v []int64) {
	if k.Count == 0 {
		k.n = uint8(len(v))
		for i, x := range v {
			k.parts[i] = [2]int64{x, x}
		}
	} else {
		for i, x := range v[:min(len(v), int(k.n))] {
			k.parts[i][0], k.parts[i][1] = min(k.parts[i][0], x), max(k.parts[i][1], x)
		}
	}
	k.Count += n
}

// NewMessageKind is a kind of count messages whose parts ranged over
// parts, each [lowest, highest], of which it keeps the first MaxParts: a
// kind read back from its Parts (the wire format).
func NewMessageKind(count int64, parts [][2]int64) MessageKind {
	k := MessageKind{Count: count, n: uint8(min(len(parts), MaxParts))}
	copy(k.parts[:], parts)
	return k
}

// Parts is the range of each part taken out of k's messages, [lowest,
// highest] in nanoseconds or bytes, in the order of its key's
// placeholders. Not to be written to.
func (k *MessageKind) Parts() [][2]int64 { return k.parts[:k.n] }

// Merge adds o, a kind with the same key, into k.
func (k *MessageKind) Merge(o MessageKind) {
	if o.Count == 0 {
		return
	}
	if k.Count == 0 {
		*k = o
		return
	}
	for i := range min(k.n, o.n) {
		k.parts[i][0], k.parts[i][1] = min(k.parts[i][0], o.parts[i][0]), max(k.parts[i][1], o.parts[i][1])
	}
	k.Count = addCount(k.Count, o.Count)
}

// Text is how the kind is shown: its key with each part written as its
// range ("timeout after 10.1s–10.4s"), or its value when every message had
// the same.
func (k MessageKind) Text(key string) string {
	if !strings.Contains(key, "\x00") {
		return key
	}
	var b strings.Builder
	i := 0
	for {
		j := strings.IndexByte(key, 0)
		if j < 0 || j+1 >= len(key) {
			b.WriteString(key)
			return b.String()
		}
		b.WriteString(key[:j])
		var lo, hi int64
		if i < int(k.n) {
			lo, hi = k.parts[i][0], k.parts[i][1]
		}
		i++
		switch key[j+1] {
		case durationPart[1]:
			a, z := roundDuration(time.Duration(lo)), roundDuration(time.Duration(hi))
			b.WriteString(a.String())
			if z != a {
				b.WriteString("–" + z.String())
			}
		case bytesPart[1]:
			b.WriteString(strconv.FormatInt(lo, 10))
			if hi != lo {
				b.WriteString("–" + strconv.FormatInt(hi, 10))
			}
		}
		key = key[j+2:]
	}
}

// roundDuration keeps three significant digits of d: 10.102s is 10.1s.
func roundDuration(d time.Duration) time.Duration {
	p := time.Duration(1)
	for x := d; x >= 1000; x /= 10 {
		p *= 10
	}
	return d.Round(p)
}

// messageKind returns the key of msg's kind and the values of the parts
// taken out of it, into vals. A message with no such part is its own key
// (no allocation).
func messageKind(msg string, vals *[MaxParts]int64) (key string, n int) {
	var b strings.Builder
	done := 0 // msg[:done] is in b
	for i := 0; i < len(msg) && n < MaxParts; i++ {
		c := msg[i]
		switch {
		case c == ':' && i > 0:
			// a local port: ":53422->"
			j := digits(msg, i+1)
			if j > i+1 && strings.HasPrefix(msg[j:], "->") {
				b.WriteString(msg[done : i+1])
				b.WriteString("*")
				done, i = j, j-1
			}
		case isIDByte(c) && (i == 0 || !isIDByte(msg[i-1])) && isID(msg, i):
			j := i
			for j < len(msg) && isIDByte(msg[j]) {
				j++
			}
			b.WriteString(msg[done:i])
			b.WriteString(idPart)
			done, i = j, j-1
		case isDigit(c) && (i == 0 || !isWordByte(msg[i-1])):
			if end, d, ok := duration(msg, i); ok {
				b.WriteString(msg[done:i])
				b.WriteString(durationPart)
				vals[n], n = int64(d), n+1
				done, i = end, end-1
				continue
			}
			j := digits(msg, i)
			count := strings.HasPrefix(msg[j:], " bytes") && (j+6 == len(msg) || !isWordByte(msg[j+6]))
			place := strings.HasSuffix(msg[:i], "byte ") || strings.HasSuffix(msg[:i], "offset ")
			if (count || place) && (j == len(msg) || !isWordByte(msg[j])) {
				v, err := strconv.ParseInt(msg[i:j], 10, 64)
				if err != nil {
					i = j - 1
					continue
				}
				b.WriteString(msg[done:i])
				b.WriteString(bytesPart)
				vals[n], n = v, n+1
				done = j
			}
			i = j - 1
		}
	}
	if done == 0 {
		return msg, 0
	}
	b.WriteString(msg[done:])
	return b.String(), n
}

// duration reads a Go duration ("10.102s", "1m2.5s", "250ms") at msg[i:],
// ending at a byte that is not a letter or digit.
func duration(msg string, i int) (end int, d time.Duration, ok bool) {
	j := i
	for {
		k := digits(msg, j)
		if k == j {
			break
		}
		if k < len(msg) && msg[k] == '.' {
			if f := digits(msg, k+1); f > k+1 {
				k = f
			}
		}
		u := unit(msg[k:])
		if u == 0 {
			break
		}
		j = k + u
	}
	if j == i || (j < len(msg) && isWordByte(msg[j])) {
		return 0, 0, false
	}
	d, err := time.ParseDuration(msg[i:j])
	if err != nil { // too long for a Duration
		return 0, 0, false
	}
	return j, d, true
}

// unit is the length of the duration unit s starts with, or 0.
func unit(s string) int {
	for _, u := range []string{"ns", "us", "µs", "μs", "ms", "s", "m", "h"} {
		if strings.HasPrefix(s, u) {
			return len(u)
		}
	}
	return 0
}

// isID reports whether the word at msg[i:] is an identifier: 16 or more
// letters, digits, '-' and '_', with at least one letter and one digit.
func isID(msg string, i int) bool {
	var letter, digit bool
	j := i
	for ; j < len(msg) && isIDByte(msg[j]); j++ {
		letter = letter || msg[j]|0x20 >= 'a' && msg[j]|0x20 <= 'z'
		digit = digit || isDigit(msg[j])
	}
	return j-i >= 16 && letter && digit
}

func isIDByte(c byte) bool {
	return isDigit(c) || c == '-' || c == '_' || (c|0x20 >= 'a' && c|0x20 <= 'z')
}

func digits(s string, i int) int {
	for i < len(s) && isDigit(s[i]) {
		i++
	}
	return i
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// isWordByte: a letter, digit, '.' or any byte of a multi-byte character
// (µ), which a duration or count must not touch.
func isWordByte(c byte) bool {
	return isDigit(c) || c == '.' || c == '_' || c >= 0x80 || (c|0x20 >= 'a' && c|0x20 <= 'z')
}

// addCount adds n >= 0 to c >= 0, stopping at math.MaxInt64: kinds merged
// from the wire may hold any count.
func addCount(c, n int64) int64 {
	if n > math.MaxInt64-c {
		return math.MaxInt64
	}
	return c + n
}
