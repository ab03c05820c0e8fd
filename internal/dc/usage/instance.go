package usage

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"strconv"
	"strings"
)

// NewInstanceID returns a new name for this limiter process in dc:
// "{dc}-{hostname}-{pid}-{8 random hex digits}", reduced to the characters
// A-Z, a-z, 0-9, '.', '_' and '-' (others become '_'), so that it can name
// an etcd key and a Kafka message key as is. Each call returns a new one: a
// restarted process is a new instance.
func NewInstanceID(dc string) string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown"
	}
	var b [4]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	id := strings.Join([]string{dc, host, strconv.Itoa(os.Getpid()), hex.EncodeToString(b[:])}, "-")
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '_', r == '-':
			return r
		}
		return '_'
	}, id)
}
