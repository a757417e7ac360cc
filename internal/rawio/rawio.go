// Package rawio reads and writes non-blocking sockets without entering the Go
// scheduler's syscall state.
//
// syscall.Read and syscall.Write tell the runtime they may block
// (entersyscall): the P is then marked as in a syscall, and sysmon, which looks
// every 20 µs while anything happens, takes the P away from a thread found
// there and hands it to another (a futex wake, a thread switch), and keeps
// waking every 20 µs instead of backing off to 10 ms. On a non-blocking
// socket the call never blocks (it returns EAGAIN instead), so telling the
// runtime is pure cost: profiled under examples/chat.star with 2,000 users,
// sysmon's wake-ups and the hand-offs they caused were a quarter of
// headroom's CPU (docs/BENCHMARKS.md, "Chat users per core").
//
// Use these only on a socket the net package made (they are non-blocking),
// from inside RawConn.Read, Write or Control.
package rawio
