// Command bucketsim finds the ceiling an ideal generator would find against
// nginx's limit_req token bucket (scripts/nginx.sh) with bench/limiter.star's
// users (one GET a second each), so bench/contention.sh can print it beside
// headroom's answers: users on independent phases start like a Poisson
// process, and a bucket with a small burst refuses some of them below its
// rate by chance, so the true ceiling of such users is under the rate, and
// spread by the draw of their phases.
//
//	go run ./bench/bucketsim -rate 400 -burst 20 -window 5s -judge 4s
//
// It runs -searches searches as headroom ceiling would (control.Search, its
// settle, judging and measuring hold) with an ideal generator, whose users'
// phases are independent and uniform whatever the search does, and prints
// "LOW MEDIAN HIGH": the 5th percentile of their answers, the median and the
// 95th percentile. An answer of headroom's outside [LOW, HIGH] is one an
// ideal generator gives one time in ten at most.
package main

import (
	"flag"
	"fmt"
	"os"
	"time"
)

func main() {
	c := config{Think: time.Second, Jitter: 0.01}
	flag.IntVar(&c.Rate, "rate", 400, "the bucket's rate, requests a second (limit_req rate)")
	flag.IntVar(&c.Burst, "burst", 20, "the bucket's burst (limit_req burst, nodelay)")
	flag.DurationVar(&c.Service, "service", time.Millisecond, "a request's time from start to the next pause")
	flag.DurationVar(&c.Window, "window", 10*time.Second, "the checks' window (headroom ceiling --window)")
	flag.DurationVar(&c.Judge, "judge", 6*time.Second, "how long a level is judged (headroom ceiling --judge)")
	flag.IntVar(&c.Start, "start", 0, "the search's first level (headroom ceiling --start-users; default a third of -rate, as bench/contention.sh)")
	flag.DurationVar(&c.Measure, "measure", 20*time.Second, "the measuring hold (headroom ceiling --measure)")
	flag.Float64Var(&c.Threshold, "threshold", 0.00025, "the share of requests refused past which a check fires (the default 5xx check: 0.025%)")
	searches := flag.Int("searches", 100, "searches to run, each with its own draws of the users' phases")
	seed := flag.Uint64("seed", 1, "the draws' seed")
	flag.Parse()
	if c.Rate < 1 || c.Burst < 0 || c.Window < time.Second || c.Judge < 0 || *searches < 20 {
		fmt.Fprintln(os.Stderr, "bucketsim: want -rate ≥ 1, -burst ≥ 0, -window ≥ 1s, -judge ≥ 0, -searches ≥ 20")
		os.Exit(2)
	}
	c.Settle = c.Window + time.Second // headroom's default settle: the checks' window and a second
	if c.Start <= 0 {
		c.Start = max(c.Rate/3, 1)
	}
	lo, median, hi := c.ideal(*searches, *seed)
	fmt.Println(lo, median, hi)
}
