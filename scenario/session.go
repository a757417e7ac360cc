package scenario

import (
	"fmt"
	"sync"

	"go.starlark.net/starlark"
)

// Sessions keeps each account's user.session from one user of the account
// to the next: what a setup put there (a token, the account's id) is there
// for the user added later in the same place, so a ceiling that steps down
// and up again does not log its users in again (issue 31: logins are load,
// 0.5 s of a real server's CPU each). One per engine; safe for concurrent
// use. A nil *Sessions keeps nothing: every user's session starts empty
// (--fresh-sessions).
type Sessions struct {
	mu   sync.Mutex
	kept map[int]*starlark.Dict // by account: a copy no user holds
}

// NewSessions returns an empty store.
func NewSessions() *Sessions { return &Sessions{kept: map[int]*starlark.Dict{}} }

// load returns a new copy of the account's session, empty if none was
// kept: the user's to change.
func (s *Sessions) load(account int) *starlark.Dict {
	if s == nil {
		return starlark.NewDict(0)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	d := s.kept[account]
	if d == nil || d.Len() == 0 {
		return starlark.NewDict(0)
	}
	c, _ := plainCopy(d, "user.session", 0, map[starlark.Value]starlark.Value{}) // it was copied once already
	return c.(*starlark.Dict)
}

// save keeps a copy of d as the account's session. A value that cannot
// outlive its user (a function, a WebSocket) is an error naming its key,
// and the account's next user starts with an empty session.
func (s *Sessions) save(account int, d *starlark.Dict) error {
	if s == nil {
		return nil
	}
	if d.Len() == 0 { // the common case, a scenario that keeps nothing: no copy, no entry
		s.forget(account)
		return nil
	}
	c, err := plainCopy(d, "user.session", 0, map[starlark.Value]starlark.Value{})
	if err != nil {
		s.forget(account)
		return fmt.Errorf("%v: user.session keeps what the next user of this account needs (a token, an id), "+
			"and outlives the user's WebSockets, lanes and functions", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.kept[account] = c.(*starlark.Dict)
	return nil
}

func (s *Sessions) forget(account int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.kept, account)
}

// keepSession saves u's session for the next user of its account; a lane's
// user has none of its own.
func (u *User) keepSession() error {
	if u.parent != nil || u.value.session == nil {
		return nil
	}
	return u.env.Sessions.save(u.env.Account, u.value.session)
}
