package testbed

import (
	"crypto/pbkdf2"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
)

// Errors of the store; handlers map them to HTTP status codes (see statusOf).
var (
	errNotFound  = errors.New("not found")
	errForbidden = errors.New("forbidden")
	errConflict  = errors.New("already exists")
	errInvalid   = errors.New("invalid")
	errAuth      = errors.New("invalid credentials")
)

// Bounds that keep the store's memory finite whatever the load.
const (
	maxPostsPerChannel     = 1000 // older posts are dropped
	maxReactionsPerPost    = 100  // older reactions are dropped
	maxSessionsPerUser     = 16   // older sessions are revoked
	maxSearchResults       = 50
	maxSearchScanned       = 10000 // posts a search looks at, at most
	channelsPerNewUser     = 5
	seedPostsPerChannel    = 30
	maxMessageRunes        = 16383
	maxUsernameLen         = 64
	maxPasswordLen         = 72
	maxEmojiNameLen        = 64
	idAlphabet             = "ybndrfg8ejkmcpqxot1uwisza345h769" // z-base-32, as Mattermost's ids
	idLen                  = 26
	channelTypeOpen        = "O"
	channelTypeDirect      = "D"
	directChannelSeparator = "__"
)

type user struct {
	ID       string `json:"id"`
	Username string `json:"username"`
	pass     [32]byte
}

type channel struct {
	ID          string  `json:"id"`
	Name        string  `json:"name"`
	DisplayName string  `json:"display_name"`
	Type        string  `json:"type"`
	posts       []*post // oldest first, at most maxPostsPerChannel
	msgCount    int64   // posts ever created in the channel
}

type member struct {
	viewedMsgCount int64 // the channel's msgCount when the user last viewed it
	lastViewedAt   int64 // ms since the epoch
}

// store is the testbed's in-memory database. It is safe for concurrent use: every method takes mu.
// Values it returns are copies, safe to read after the lock is released.
type store struct {
	rounds int // Config.HashRounds
	mu     sync.RWMutex
	rng    *rand.Rand
	now    func() time.Time

	users        map[string]*user // by id
	byName       map[string]*user // by username
	names        []string         // usernames, sorted, for prefix search
	sessions     map[string]string
	userSessions map[string][]string // user id -> tokens, oldest first

	channels []*channel          // public channels, in creation order
	byID     map[string]*channel // every channel
	direct   map[string]*channel // direct channels by name
	members  map[string]map[string]*member

	posts       map[string]*post
	threads     map[string]*thread         // by root post id
	userThreads map[string]map[string]bool // user id -> root ids of the threads they take part in
}

// newStore returns a store with cfg.Channels public channels holding seeded posts by a bot user.
// cfg must have its defaults applied.
func newStore(cfg Config, now func() time.Time) *store {
	st := &store{
		rounds:       cfg.HashRounds,
		rng:          rand.New(rand.NewPCG(uint64(cfg.Seed), 0x7e57bed)),
		now:          now,
		users:        map[string]*user{},
		byName:       map[string]*user{},
		sessions:     map[string]string{},
		userSessions: map[string][]string{},
		byID:         map[string]*channel{},
		direct:       map[string]*channel{},
		members:      map[string]map[string]*member{},
		posts:        map[string]*post{},
		threads:      map[string]*thread{},
		userThreads:  map[string]map[string]bool{},
	}
	bot := st.addUser("testbed-bot", st.newID())
	start := now().Add(-time.Duration(seedPostsPerChannel) * time.Minute).UnixMilli()
	for i := range cfg.Channels {
		name := fmt.Sprintf("channel-%02d", i)
		switch i {
		case 0:
			name = "town-square"
		case 1:
			name = "off-topic"
		}
		ch := &channel{ID: st.newID(), Name: name, DisplayName: name, Type: channelTypeOpen}
		st.channels = append(st.channels, ch)
		st.byID[ch.ID] = ch
		st.join(bot.ID, ch)
		var root string
		for j := range seedPostsPerChannel {
			p := &post{ID: st.newID(), UserID: bot.ID, ChannelID: ch.ID, Message: st.sentence(),
				CreateAt: start + int64(j)*time.Minute.Milliseconds()}
			if j%4 == 3 {
				p.RootID = root
			} else {
				root = p.ID
			}
			p.UpdateAt = p.CreateAt
			st.insertPost(ch, p)
		}
	}
	return st
}

var words = strings.Fields(`the a load test chat channel release server user post thread reply latency
	ceiling capacity queue worker metric deploy build green red fast slow today tomorrow lunch coffee
	meeting review merge branch bug fix ship it looks good to me please check again thanks`)

// sentence returns a seeded message of 4 to 15 words. Callers hold mu.
func (st *store) sentence() string {
	n := 4 + st.rng.IntN(12)
	w := make([]string, n)
	for i := range w {
		w[i] = words[st.rng.IntN(len(words))]
	}
	return strings.Join(w, " ")
}

// newID returns a 26-character id from the seeded stream. Callers hold mu (or own st).
func (st *store) newID() string {
	var b [idLen]byte
	for i := range b {
		b[i] = idAlphabet[st.rng.IntN(len(idAlphabet))]
	}
	return string(b[:])
}

// passHash is the stored form of a password: hashPassword's at st's
// rounds, or one SHA-256 without.
func (st *store) passHash(username, password string) [32]byte {
	if st.rounds > 0 {
		return hashPassword(username, password, st.rounds)
	}
	return sha256.Sum256([]byte(username + "\x00" + password))
}

// hashPassword is PBKDF2-SHA256 of the password, salted with the user
// name, at the given rounds (Config.HashRounds): the CPU a real server
// spends on a login on purpose, under a name of its own in a profile.
//
//go:noinline
func hashPassword(username, password string, rounds int) [32]byte {
	k, err := pbkdf2.Key(sha256.New, password, []byte(username), rounds, 32)
	if err != nil { // only for a key length or rounds out of range
		panic(err)
	}
	return [32]byte(k)
}

// addUser stores a new user with no usable password. Callers hold mu.
func (st *store) addUser(username, id string) *user {
	u := &user{ID: id, Username: username}
	st.users[id] = u
	st.byName[username] = u
	i, _ := slices.BinarySearch(st.names, username)
	st.names = slices.Insert(st.names, i, username)
	return u
}

// join makes userID a member of ch, if it is not one already. Callers hold mu.
func (st *store) join(userID string, ch *channel) {
	m := st.members[userID]
	if m == nil {
		m = map[string]*member{}
		st.members[userID] = m
	}
	if m[ch.ID] == nil {
		m[ch.ID] = &member{viewedMsgCount: ch.msgCount, lastViewedAt: st.now().UnixMilli()}
	}
}

// channelMembers returns the ids of the users who are members of channelID.
func (st *store) channelMembers(channelID string) []string {
	st.mu.RLock()
	defer st.mu.RUnlock()
	var ids []string
	for id, chans := range st.members {
		if chans[channelID] != nil {
			ids = append(ids, id)
		}
	}
	return ids
}

func validUsername(name string) bool {
	if name == "" || len(name) > maxUsernameLen {
		return false
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return false
		}
	}
	return true
}

// createUser stores a user and joins it to up to channelsPerNewUser public channels chosen from its id.
// The username is lower-cased; it must be 1 to 64 characters among a-z, 0-9, '.', '_' and '-'.
func (st *store) createUser(username, password string) (user, error) {
	username = strings.ToLower(username)
	if !validUsername(username) {
		return user{}, fmt.Errorf("username %q: 1 to %d characters among a-z 0-9 . _ -: %w", username, maxUsernameLen, errInvalid)
	}
	if password == "" || len(password) > maxPasswordLen {
		return user{}, fmt.Errorf("password: 1 to %d bytes: %w", maxPasswordLen, errInvalid)
	}
	pass := st.passHash(username, password) // outside the lock: a slow hash holds no other request up
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.byName[username] != nil {
		return user{}, fmt.Errorf("username %q: %w", username, errConflict)
	}
	u := st.addUser(username, st.newID())
	u.pass = pass
	h := fnv.New32a()
	h.Write([]byte(u.ID))
	first := int(h.Sum32() % uint32(len(st.channels)))
	for k := range min(channelsPerNewUser, len(st.channels)) {
		st.join(u.ID, st.channels[(first+k)%len(st.channels)])
	}
	return *u, nil
}

// login checks the password and returns the user and a new session token.
func (st *store) login(username, password string) (user, string, error) {
	username = strings.ToLower(username)
	pass := st.passHash(username, password) // outside the lock, and for a name unknown too: no timing tells
	st.mu.Lock()
	defer st.mu.Unlock()
	u := st.byName[username]
	if u == nil || u.pass != pass {
		return user{}, "", errAuth
	}
	token := st.newID()
	st.sessions[token] = u.ID
	toks := append(st.userSessions[u.ID], token)
	if len(toks) > maxSessionsPerUser {
		delete(st.sessions, toks[0])
		toks = slices.Delete(toks, 0, 1)
	}
	st.userSessions[u.ID] = toks
	return *u, token, nil
}

// session returns the id of the user the token belongs to, or "" if it is unknown.
func (st *store) session(token string) string {
	st.mu.RLock()
	defer st.mu.RUnlock()
	return st.sessions[token]
}

func (st *store) getUser(id string) (user, error) {
	st.mu.RLock()
	defer st.mu.RUnlock()
	u := st.users[id]
	if u == nil {
		return user{}, fmt.Errorf("user %s: %w", id, errNotFound)
	}
	return *u, nil
}

// searchUsers returns up to maxSearchResults users whose username starts with term (case-insensitive),
// sorted by username. An empty term matches everyone.
func (st *store) searchUsers(term string) []user {
	term = strings.ToLower(term)
	st.mu.RLock()
	defer st.mu.RUnlock()
	out := []user{}
	i, _ := slices.BinarySearch(st.names, term)
	for ; i < len(st.names) && len(out) < maxSearchResults && strings.HasPrefix(st.names[i], term); i++ {
		out = append(out, *st.byName[st.names[i]])
	}
	return out
}

// myChannels returns the channels userID is a member of, sorted by name.
func (st *store) myChannels(userID string) []channel {
	st.mu.RLock()
	defer st.mu.RUnlock()
	out := []channel{}
	for id := range st.members[userID] {
		out = append(out, *st.byID[id])
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// readable returns the channel if userID may read it: public channels are readable by everyone,
// direct ones by their members. Callers hold mu.
func (st *store) readable(userID, channelID string) (*channel, error) {
	ch := st.byID[channelID]
	if ch == nil {
		return nil, fmt.Errorf("channel %s: %w", channelID, errNotFound)
	}
	if ch.Type != channelTypeOpen && st.members[userID][channelID] == nil {
		return nil, fmt.Errorf("channel %s: not a member: %w", channelID, errForbidden)
	}
	return ch, nil
}

// mayRead says whether userID may read the channel (readable), under mu: for callers that hold it not,
// as a WebSocket's typing event, while other users' requests create direct channels.
func (st *store) mayRead(userID, channelID string) error {
	st.mu.RLock()
	defer st.mu.RUnlock()
	_, err := st.readable(userID, channelID)
	return err
}

// memberOf returns the channel and the membership of userID in it. Callers hold mu.
func (st *store) memberOf(userID, channelID string) (*channel, *member, error) {
	ch := st.byID[channelID]
	if ch == nil {
		return nil, nil, fmt.Errorf("channel %s: %w", channelID, errNotFound)
	}
	m := st.members[userID][channelID]
	if m == nil {
		return nil, nil, fmt.Errorf("channel %s: not a member: %w", channelID, errForbidden)
	}
	return ch, m, nil
}

// viewChannel marks every message of the channel read by userID.
func (st *store) viewChannel(userID, channelID string) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	ch, m, err := st.memberOf(userID, channelID)
	if err != nil {
		return err
	}
	m.viewedMsgCount = ch.msgCount
	m.lastViewedAt = st.now().UnixMilli()
	return nil
}

// unread returns the number of messages posted in the channel since userID last viewed it.
func (st *store) unread(userID, channelID string) (int64, error) {
	st.mu.RLock()
	defer st.mu.RUnlock()
	ch, m, err := st.memberOf(userID, channelID)
	if err != nil {
		return 0, err
	}
	return ch.msgCount - m.viewedMsgCount, nil
}

// joinChannel makes userID a member of a public channel; joining twice is not an error.
func (st *store) joinChannel(userID, channelID string) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	ch := st.byID[channelID]
	if ch == nil {
		return fmt.Errorf("channel %s: %w", channelID, errNotFound)
	}
	if ch.Type != channelTypeOpen {
		return fmt.Errorf("channel %s is not public: %w", channelID, errForbidden)
	}
	st.join(userID, ch)
	return nil
}

// directChannel returns the direct channel between a and b, creating it if needed; created says which.
// The caller must be a or b.
func (st *store) directChannel(caller, a, b string) (ch channel, created bool, err error) {
	if caller != a && caller != b {
		return channel{}, false, fmt.Errorf("direct channel between others: %w", errForbidden)
	}
	if a > b {
		a, b = b, a
	}
	name := a + directChannelSeparator + b
	st.mu.Lock()
	defer st.mu.Unlock()
	if c := st.direct[name]; c != nil {
		return *c, false, nil
	}
	for _, id := range []string{a, b} {
		if st.users[id] == nil {
			return channel{}, false, fmt.Errorf("user %s: %w", id, errNotFound)
		}
	}
	c := &channel{ID: st.newID(), Name: name, DisplayName: name, Type: channelTypeDirect}
	st.byID[c.ID] = c
	st.direct[name] = c
	st.join(a, c)
	st.join(b, c)
	return *c, true, nil
}
