package console

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"slices"
	"sync"
	"time"
)

// Session bounds: the defaults of Config's session fields.
const (
	// DefaultSessionIdle ends a session unused for this long.
	DefaultSessionIdle = time.Hour
	// DefaultSessionLifetime ends a session this long after sign-in,
	// however much it is used.
	DefaultSessionLifetime = 12 * time.Hour
	// DefaultMaxSessions bounds the sessions a console holds at once.
	DefaultMaxSessions = 10000
)

// sessionIDBytes is the length of a session id before encoding: 256 bits
// from crypto/rand.
const sessionIDBytes = 32

// maxNotices bounds the one-time messages a session holds for its next
// page; past it, the oldest go.
const maxNotices = 8

// session is what a session id stands for: the token signed in with,
// held only in memory, the session's times, and the one-time messages
// (the admin API's warnings) its next page shows.
type session struct {
	token    string
	created  time.Time
	lastUsed time.Time
	notices  []string
}

// sessions maps session ids to sessions. Ids are kept as SHA-256 digests,
// so that a map lookup's timing says nothing about a valid id. It is safe
// for concurrent use.
type sessions struct {
	now      func() time.Time
	idle     time.Duration
	lifetime time.Duration
	max      int

	mu   sync.Mutex
	byID map[[sha256.Size]byte]*session
}

func newSessions(now func() time.Time, idle, lifetime time.Duration, limit int) *sessions {
	return &sessions{now: now, idle: idle, lifetime: lifetime, max: limit, byID: make(map[[sha256.Size]byte]*session)}
}

// start opens a session for token and returns its id. At the bound, the
// expired sessions go first, then the least recently used.
func (ss *sessions) start(token string) (string, error) {
	b := make([]byte, sessionIDBytes)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("console: session id: %w", err)
	}
	id := base64.RawURLEncoding.EncodeToString(b)
	now := ss.now()
	ss.mu.Lock()
	defer ss.mu.Unlock()
	var lru [sha256.Size]byte
	var lruAt time.Time
	for k, s := range ss.byID {
		if ss.expired(s, now) {
			delete(ss.byID, k)
			continue
		}
		if lruAt.IsZero() || s.lastUsed.Before(lruAt) {
			lru, lruAt = k, s.lastUsed
		}
	}
	if len(ss.byID) >= ss.max {
		delete(ss.byID, lru)
	}
	ss.byID[sha256.Sum256([]byte(id))] = &session{token: token, created: now, lastUsed: now}
	return id, nil
}

// use returns the token of the session id names, and marks it used; false
// when there is no such session or it expired (it is then dropped).
func (ss *sessions) use(id string) (string, bool) {
	k := sha256.Sum256([]byte(id))
	now := ss.now()
	ss.mu.Lock()
	defer ss.mu.Unlock()
	s, ok := ss.byID[k]
	if !ok {
		return "", false
	}
	if ss.expired(s, now) {
		delete(ss.byID, k)
		return "", false
	}
	s.lastUsed = now
	return s.token, true
}

// addNotices keeps msgs for the next page the session id names renders
// (see takeNotices), after those it holds already, at most maxNotices in
// all. It does nothing when there is no such session.
func (ss *sessions) addNotices(id string, msgs []string) {
	if len(msgs) == 0 {
		return
	}
	k := sha256.Sum256([]byte(id))
	ss.mu.Lock()
	defer ss.mu.Unlock()
	s, ok := ss.byID[k]
	if !ok {
		return
	}
	s.notices = append(s.notices, msgs...)
	if n := len(s.notices); n > maxNotices {
		s.notices = slices.Clone(s.notices[n-maxNotices:])
	}
}

// takeNotices returns the messages the session id names holds, and
// forgets them: each is shown once.
func (ss *sessions) takeNotices(id string) []string {
	k := sha256.Sum256([]byte(id))
	ss.mu.Lock()
	defer ss.mu.Unlock()
	s, ok := ss.byID[k]
	if !ok {
		return nil
	}
	msgs := s.notices
	s.notices = nil
	return msgs
}

// end drops the session id names, if any.
func (ss *sessions) end(id string) {
	k := sha256.Sum256([]byte(id))
	ss.mu.Lock()
	defer ss.mu.Unlock()
	delete(ss.byID, k)
}

// expired reports whether s has ended at now. ss.mu is held.
func (ss *sessions) expired(s *session, now time.Time) bool {
	return !now.Before(s.lastUsed.Add(ss.idle)) || !now.Before(s.created.Add(ss.lifetime))
}
