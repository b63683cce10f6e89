// Package testkit holds the test doubles both planes' tests share: a
// settable clock, a log destination safe for concurrent writers, the one
// test logger (lines through t), the one bounded wait (WaitFor, and
// WaitForState for waits that report what they last saw), the builder
// of the real tenantd binary for process tests, the copy of a data
// directory as a power cut leaves it (CrashImage), free ports, test
// certificates (PeerCAPEM, SelfSignedPEM), and the tools `make tools`
// installs (CachedTool, Kcat, and StripeMock, which runs one). Only tests
// and the test launchers import it; it imports nothing of the module.
package testkit

import (
	"bytes"
	"sync"
	"time"
)

// Clock is a clock a test moves by hand; it is safe for concurrent use.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// NewClock returns a clock standing at t.
func NewClock(t time.Time) *Clock { return &Clock{t: t} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock forward by d and returns the new time.
func (c *Clock) Advance(d time.Duration) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
	return c.t
}

// LogBuffer collects what loggers write, from any number of goroutines.
type LogBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *LogBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns everything written so far.
func (s *LogBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
