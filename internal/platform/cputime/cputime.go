// Package cputime reads how much CPU time a process has used, for the
// benchmarks and load tools that report CPU per decision: this process's
// own (getrusage), or another's by pid (/proc/PID/stat). Linux only, as
// the rest of Weir's measuring is.
package cputime

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Self returns the user and system CPU time this process has used so far,
// all its threads included.
func Self() (time.Duration, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, fmt.Errorf("cputime: getrusage: %w", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}

// tick is the unit of /proc/PID/stat's times: USER_HZ, 100 per second
// on Linux whatever the kernel's own tick.
const tick = 10 * time.Millisecond

// Process returns the user and system CPU time process pid has used so
// far, from /proc/PID/stat, in steps of 10 ms.
func Process(pid int) (time.Duration, error) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, fmt.Errorf("cputime: %w", err)
	}
	return parseStat(string(data))
}

// parseStat reads utime and stime from a /proc/PID/stat line: fields 14
// and 15 (1-based), counted after the ")" that ends the command name,
// which may itself hold spaces and parentheses.
func parseStat(s string) (time.Duration, error) {
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("cputime: no command name in stat line %q", s)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("cputime: %d fields after the command name in stat line %q, want at least 13", len(f), s)
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil || ut < 0 || st < 0 {
		return 0, fmt.Errorf("cputime: utime %q and stime %q in stat line %q are not tick counts", f[11], f[12], s)
	}
	return time.Duration(ut+st) * tick, nil
}
