package gopool

import (
	"errors"
	"net/http"
	"sync"
	"testing"
	"time"
)

// TestPool: a goroutine that finished its function takes the next
// one; Run never waits for an idle goroutine; an idle one ends.
func TestPool(t *testing.T) {
	pool := New(time.Hour)
	for range 100 {
		done := make(chan struct{})
		pool.Run(func() { close(done) })
		<-done
	}
	// The next run can come before the goroutine that ran the last
	// function waits again; then a second one starts, no more.
	if started := pool.Started(); started > 2 {
		t.Errorf("100 functions one after the other started %d goroutines, want at most 2", started)
	}

	busy := New(time.Hour)
	release := make(chan struct{})
	var running sync.WaitGroup
	running.Add(5)
	for range 5 {
		busy.Run(func() {
			running.Done()
			<-release
		})
	}
	// Would hang if run waited for a goroutine to become idle.
	running.Wait()
	close(release)
	if started := busy.Started(); started != 5 {
		t.Errorf("5 functions at once started %d goroutines, want 5", started)
	}

	short := New(10 * time.Millisecond)
	done := make(chan struct{})
	short.Run(func() { close(done) })
	<-done
	time.Sleep(200 * time.Millisecond)
	done = make(chan struct{})
	short.Run(func() { close(done) })
	<-done
	if started := short.Started(); started != 2 {
		t.Errorf("a function after the idle time started %d goroutines in all, want 2 (the idle one ended)", started)
	}
}

// TestCall: Call waits for f, raises f's panic again in the caller with
// its value, and the goroutine that ran a panicking f serves the next one.
func TestCall(t *testing.T) {
	pool := New(time.Hour)
	ran := false
	pool.Call(func() { ran = true })
	if !ran {
		t.Fatal("Call returned before f ran")
	}
	call := func(value any) {
		defer func() {
			if r := recover(); r != value {
				t.Errorf("recovered %v, want %v", r, value)
			}
		}()
		pool.Call(func() { panic(value) })
		t.Errorf("Call returned after a panic of %v", value)
	}
	values := []any{http.ErrAbortHandler, "boom", errors.New("failed")}
	for i := range 60 {
		call(values[i%len(values)])
		pool.Call(func() {})
	}
	// A goroutine can be started while the last one is on its way back
	// to wait; one ended by each panic would make 60 or more.
	if started := pool.Started(); started > 10 {
		t.Errorf("120 calls one after the other, half of them panicking, started %d goroutines", started)
	}
}
