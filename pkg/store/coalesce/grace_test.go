package coalesce

import (
	"testing"
	"time"
)

func TestGrace(t *testing.T) {
	deadline := time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)
	ms := time.Millisecond
	tests := []struct {
		name   string
		late   time.Duration
		graced bool
		want   time.Duration
	}{
		{"on time", 0, false, 0},
		{"within the timer's slack", lateFiring, false, 0},
		{"late: as long again", 30 * ms, false, 30 * ms},
		{"very late: at most the limit", 500 * ms, false, 200 * ms},
		{"late again after a grace: expire", 30 * ms, true, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := grace(deadline.Add(tt.late), deadline, tt.graced, 200*ms); got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}
