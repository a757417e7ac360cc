//go:build !linux

package wakeup

import "time"

// Guard does nothing here: the poller's sleep is this system's.
type Guard struct{}

// New returns nil: a nil Guard does nothing.
func New() *Guard { return nil }

// Arm does nothing.
func (g *Guard) Arm(time.Duration) {}

// Close does nothing.
func (g *Guard) Close() {}
