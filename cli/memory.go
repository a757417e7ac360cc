package cli

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// memory is --max-memory: a size (512MiB, 2GiB, 1.5GB), a share of the
// memory this process may use (50%), or 0 for no limit.
type memory struct {
	flagText
}

func (m *memory) Set(s string) error {
	s = strings.TrimSpace(s)
	if _, _, err := parseMemory(s); err != nil {
		return err
	}
	m.text = s
	return nil
}

var memUnits = []struct {
	suffix string
	bytes  float64
}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12}, {"B", 1}}

// minMemory is the least --max-memory takes: headroom alone needs tens of MiB.
const minMemory = 64 << 20

// parseMemory reads a --max-memory value: bytes, or a fraction of the
// process's memory (share, in (0, 1]).
func parseMemory(s string) (bytes uint64, share float64, err error) {
	bad := errors.New("want a size such as 512MiB or 4GiB, a share of the machine's memory such as 50%, or 0 for no limit")
	if s == "0" {
		return 0, 0, nil
	}
	if num, ok := strings.CutSuffix(s, "%"); ok {
		v, err := strconv.ParseFloat(num, 64)
		if err != nil || !finite(v) || v <= 0 || v > 100 {
			return 0, 0, bad
		}
		return 0, v / 100, nil
	}
	v, ok := parseBytes(s)
	if !ok || v > math.MaxInt64 {
		return 0, 0, bad
	}
	if v < minMemory {
		return 0, 0, fmt.Errorf("%s is too little for headroom itself; want at least 64MiB", s)
	}
	return uint64(v), 0, nil
}

// parseBytes reads a positive size with a unit (512KiB, 1.5GB) as bytes.
func parseBytes(s string) (float64, bool) {
	for _, u := range memUnits {
		if num, ok := strings.CutSuffix(s, u.suffix); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
			if err != nil || !finite(v) || v <= 0 {
				return 0, false
			}
			return v * u.bytes, true
		}
	}
	return 0, false
}

// size is a flag of a number of bytes, such as 64MiB.
type size struct {
	flagText
	bytes uint64
}

func (s *size) Set(v string) error {
	v = strings.TrimSpace(v)
	n, ok := parseBytes(v)
	if !ok || n < 1 || n > 1<<40 {
		return errors.New("want a size such as 512KiB, 64MiB or 1GiB")
	}
	s.text, s.bytes = v, uint64(n)
	return nil
}

// maxMemory resolves --max-memory against what the process may use.
func (f *loadFlags) maxMemory(env Env) uint64 { return f.memory.resolve(env) }

// resolve is m in bytes: a share of what the process may use (a share of
// an unknown amount is no limit), or 0 for none.
func (m memory) resolve(env Env) uint64 {
	bytes, share, _ := parseMemory(m.text)
	if share > 0 {
		bytes = uint64(share * float64(env.limits().Memory))
	}
	return bytes
}

// agentMemory is the --max-memory of each of n local agents: an equal part of
// limit (bytes; 0, none), at least what headroom needs itself.
func agentMemory(limit uint64, n int) string {
	if limit == 0 {
		return "0"
	}
	return fmt.Sprintf("%dB", max(limit/uint64(max(n, 1)), minMemory))
}
