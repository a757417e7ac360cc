// Package wakeup ends the Go runtime's idle sleep on time.
//
// With nothing to run, the runtime sleeps in epoll_wait, whose timeout is in
// whole milliseconds: a timer due in 50 µs when the process goes idle fires
// after a millisecond (golang/go#53824, open). The open model's dispatcher,
// whose next arrival is often under a millisecond away, then sends it up to
// a millisecond late, and a millisecond's arrivals together: at 2,000/s,
// arrivals left late by p50 0.55 ms and p99 1.1 ms, a millisecond grid that
// the load was not meant to have (2026-11-30, docs/BENCHMARKS-LOG.md).
//
// A Guard is a timerfd in the runtime's own epoll set. Arm(d) has the
// kernel, whose timers are exact, wake that sleep after d; the runtime then
// runs the timers due. Nothing reads the timerfd: each expiry is a new edge
// for the edge-triggered poller, which is all the wake-up needs.
package wakeup
