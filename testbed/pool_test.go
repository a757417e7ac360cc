package testbed

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// fakeClock is a clock the test moves by hand.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) set(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = time.Unix(0, 0).Add(d)
}

// TestPoolStart checks when services start: at arrival for a free worker, at the due end of the previous
// service for a queued request (making up for a late wake-up), but never before arrival nor more than
// maxCatchUp in the past.
func TestPoolStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		at := func(d time.Duration) time.Time { return time.Unix(0, 0).Add(d) }
		clk := &fakeClock{}
		p := newPool(1, 5, clk.now)

		clk.set(0)
		if start, err := p.acquire(t.Context()); err != nil || !start.Equal(at(0)) {
			t.Fatalf("free worker: start %v, %v; want 0", start, err)
		}
		queued := func(arrive time.Duration) <-chan time.Time {
			clk.set(arrive)
			ch := make(chan time.Time, 1)
			go func() {
				start, err := p.acquire(t.Context())
				if err != nil {
					t.Error(err)
				}
				ch <- start
			}()
			synctest.Wait()
			return ch
		}

		b := queued(1 * time.Millisecond)
		clk.set(10*time.Millisecond + 600*time.Microsecond) // woken 0.6 ms late
		p.release(at(10 * time.Millisecond))
		if got := <-b; !got.Equal(at(10 * time.Millisecond)) {
			t.Errorf("queued request starts at %v, want the due end 10ms", got.Sub(at(0)))
		}

		c := queued(30 * time.Millisecond)
		clk.set(31 * time.Millisecond)
		p.release(at(20 * time.Millisecond)) // was due before c arrived
		if got := <-c; !got.Equal(at(30 * time.Millisecond)) {
			t.Errorf("request arriving after the due end starts at %v, want its arrival 30ms", got.Sub(at(0)))
		}

		d := queued(40 * time.Millisecond)
		clk.set(100 * time.Millisecond)
		p.release(at(45 * time.Millisecond)) // 55 ms behind: starved, not late
		if got, want := <-d, at(100*time.Millisecond-maxCatchUp); !got.Equal(want) {
			t.Errorf("catch-up after a starved worker starts at %v, want %v", got.Sub(at(0)), want.Sub(at(0)))
		}
		p.release(clk.now())
	})
}

func TestPoolQueueBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newPool(1, 1, time.Now)
		if _, err := p.acquire(t.Context()); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		errc := make(chan error, 1)
		go func() {
			_, err := p.acquire(ctx)
			errc <- err
		}()
		synctest.Wait()
		if _, err := p.acquire(t.Context()); !errors.Is(err, errOverloaded) {
			t.Errorf("with the queue full: %v, want errOverloaded", err)
		}
		cancel()
		if err := <-errc; !errors.Is(err, context.Canceled) {
			t.Errorf("cancelled while queued: %v, want context.Canceled", err)
		}
		if p.queued() != 0 || p.busy() != 1 {
			t.Errorf("%d queued, %d busy; want 0 and 1", p.queued(), p.busy())
		}
		p.release(time.Now())
		if p.busy() != 0 {
			t.Errorf("%d busy after release, want 0", p.busy())
		}
	})
}

func TestNoQueue(t *testing.T) {
	p := newPool(1, 0, time.Now)
	if _, err := p.acquire(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := p.acquire(context.Background()); !errors.Is(err, errOverloaded) {
		t.Errorf("with no queue and the worker busy: %v, want errOverloaded", err)
	}
}
