//go:build linux

package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// run releases due calls until ctx ends, then closes p.due, and returns
// each wake-up's lag (see wake).
//
// On Linux it waits on a periodic timerfd read through Go's network
// poller. A Go timer cannot serve here: an idle Go runtime sleeps in
// epoll_wait with a timeout in whole milliseconds, so time.Sleep wakes up
// to a millisecond late, and paced calls 90 µs apart would be sent in
// clumps a millisecond late. A timerfd is a high-resolution kernel timer:
// the poller wakes when it expires, within microseconds.
func (p *pacer) run(ctx context.Context) ([]time.Duration, error) {
	defer close(p.due)
	fd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("timerfd_create: %w", err)
	}
	// A non-blocking descriptor given to os.NewFile is read through the
	// poller, and Close unblocks a pending Read.
	f := os.NewFile(uintptr(fd), "pacer-timerfd")
	defer f.Close()

	// The first expiry is at start, measured on the monotonic clock the
	// timerfd uses, then every interval.
	first := time.Until(p.start)
	if first <= 0 {
		first = time.Nanosecond
	}
	spec := unix.ItimerSpec{Value: unix.NsecToTimespec(first.Nanoseconds()), Interval: unix.NsecToTimespec(p.interval.Nanoseconds())}
	if err := unix.TimerfdSettime(fd, 0, &spec, nil); err != nil {
		return nil, fmt.Errorf("timerfd_settime: %w", err)
	}
	// Armed only now, so the descriptor is never closed under the calls
	// above.
	stop := context.AfterFunc(ctx, func() { f.Close() })
	defer stop()
	var (
		buf  [8]byte
		next int64
		lags = make([]time.Duration, 0, 1<<16)
	)
	for {
		if _, err := f.Read(buf[:]); err != nil {
			if ctx.Err() != nil {
				return lags, nil
			}
			return lags, fmt.Errorf("read timerfd: %w", err)
		}
		next, lags = p.wake(ctx, next, time.Now(), lags)
		if ctx.Err() != nil {
			return lags, nil
		}
	}
}
