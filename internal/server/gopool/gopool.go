// Package gopool runs functions on goroutines that stay for the next one,
// and so keep the stacks the functions grew.
//
// A goroutine starts with a stack of a few KiB, and its stack is copied
// on each doubling as calls go deeper. The server's request paths go tens
// of KiB deep (the handler filters; the field manager's walks of objects
// under an update), on goroutines that upstream's handlers start for each
// request: the copying was 1.2% of the server's CPU for the in-process
// requests alone while pods were placed, and another 2.2% under the
// updates of the stores. A goroutine kept for the next function keeps its
// grown stack (until the garbage collector shrinks an idle one). An idle
// goroutine ends after a while.
package gopool

import (
	"sync/atomic"
	"time"
)

// Pool is a set of goroutines that run functions.
type Pool struct {
	work chan func()
	// idle is how long an idle goroutine waits for work.
	idle time.Duration
	// started counts the goroutines started.
	started atomic.Int64
}

// New returns a pool whose goroutines end after idle without work.
func New(idle time.Duration) *Pool {
	return &Pool{work: make(chan func()), idle: idle}
}

// Started is how many goroutines the pool has started.
func (p *Pool) Started() int64 {
	return p.started.Load()
}

// Run runs f on an idle goroutine, or on a new one when none is idle; it
// never waits for one to become idle, nor for f.
func (p *Pool) Run(f func()) {
	select {
	case p.work <- f:
	default:
		p.started.Add(1)
		go p.serve(f)
	}
}

// Call runs f as Run does and returns once f has returned. A panic in f
// is raised again in the caller's goroutine, with the same value, so that
// the caller's recovery sees it (http.ErrAbortHandler included).
func (p *Pool) Call(f func()) {
	done := make(chan any, 1)
	p.Run(func() {
		// recover is nil when f returned.
		defer func() { done <- recover() }()
		f()
	})
	if r := <-done; r != nil {
		panic(r)
	}
}

func (p *Pool) serve(f func()) {
	idle := time.NewTimer(p.idle)
	defer idle.Stop()
	for {
		f()
		// Let go of what f holds while waiting.
		f = nil
		idle.Reset(p.idle)
		select {
		case f = <-p.work:
		case <-idle.C:
			return
		}
	}
}
