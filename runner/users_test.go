package runner

import (
	"context"
	"testing"
	"time"

	"github.com/headroom-dev/headroom/result"
)

// Asking for a huge number of users does not hold up the run's loop: it
// adds them a batch at a time, so Ctrl-C stops the run at once.
func TestHugeUserCountStaysResponsive(t *testing.T) {
	target := httpbinServer(t)
	sc := load(t, "def a(user):\n    pass\nactions = [action('A', a)]\nthink_time = think.constant('1h')\n")
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(300*time.Millisecond, cancel)
	start := time.Now()
	b := &Bounded{Common: Common{Scenario: sc, Target: target, Grace: time.Second, addBudget: 5 * time.Millisecond},
		Users: 10_000_000, Duration: time.Minute}
	most := 0
	b.OnTick = func(t Tick) { most = max(most, t.Users) }
	got, err := b.Run(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// A run that ignored Ctrl-C would go its minute; stopping takes
	// milliseconds, a few seconds at worst on a busy machine; adding its
	// 10 million users unbudgeted would take longer than the bound.
	if el := time.Since(start); el > 10*time.Second {
		t.Errorf("took %v to stop after Ctrl-C at 300 ms", el)
	}
	if got.Status != result.Interrupted {
		t.Errorf("status %q", got.Status)
	}
	t.Logf("%d users added before the interrupt", most)
	if most == 0 || most >= 10_000_000 {
		t.Errorf("%d users added", most)
	}
}
