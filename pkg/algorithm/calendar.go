package algorithm

import (
	"fmt"
	"time"
)

// Calendar places the windows of a FixedWindow: back to back from the
// Unix epoch (Rolling, the zero value: a window of a day starts at
// midnight UTC, an hour on the hour), or on calendar months in UTC
// (Month: from midnight on the 1st to midnight on the 1st of the next
// month, 28 to 31 days).
type Calendar uint8

const (
	// Rolling windows are Params.Window long, starting at multiples of it
	// since the Unix epoch.
	Rolling Calendar = iota
	// Month windows are the calendar months in UTC. Params.Window must be
	// MonthWindow, the longest month: it bounds the window's memory.
	Month
)

// MonthWindow is the Window of Params whose Calendar is Month: 31 days.
const MonthWindow = 31 * 24 * time.Hour

// String returns the calendar's name as rules spell it: "" or "month".
func (c Calendar) String() string {
	switch c {
	case Rolling:
		return ""
	case Month:
		return "month"
	}
	return fmt.Sprintf("Calendar(%d)", uint8(c))
}

// ParseCalendar returns the calendar named s: "" (Rolling) or "month".
func ParseCalendar(s string) (Calendar, error) {
	switch s {
	case "":
		return Rolling, nil
	case "month":
		return Month, nil
	}
	return 0, fmt.Errorf("%w: unknown calendar %q (want \"month\", or none)", ErrInvalidParams, s)
}

// bounds returns the start and end, in Unix ms, of p's fixed window that
// holds Unix ms t.
func (p Params) bounds(t int64) (start, end int64) {
	if p.Calendar == Month {
		u := time.UnixMilli(t).UTC()
		first := time.Date(u.Year(), u.Month(), 1, 0, 0, 0, 0, time.UTC)
		return first.UnixMilli(), first.AddDate(0, 1, 0).UnixMilli()
	}
	w := p.Window.Milliseconds()
	start = windowStart(t, w)
	return start, start + w
}

// WindowBounds returns the start and end of the fixed window of p that
// holds t: for a store that keeps the window's count elsewhere and must
// place calendar windows the same way.
func (p Params) WindowBounds(t time.Time) (start, end time.Time) {
	s, e := p.bounds(t.UnixMilli())
	return time.UnixMilli(s), time.UnixMilli(e)
}
