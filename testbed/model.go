// Package testbed is a small chat-like HTTP API (modelled on Mattermost's) whose capacity is set by its
// configuration, so the ceiling of a load test against it is known in advance. It is used for demos,
// tests and benchmarks of headroom itself.
//
// The capacity model: every /api/v4 request takes one of Config.Workers workers, waiting in a queue of
// at most Config.Queue requests when all are busy, and holds its worker for the route's service time
// (ServiceTime), counted from the moment the worker was free for it. The service time is waited out on
// a timer, not burnt on the CPU, so the capacity does not depend on the load of the machine.
// See docs/TESTBED.md.
package testbed

import (
	"sort"
	"time"
)

// Defaults of Config, used where a field is zero.
const (
	DefaultWorkers  = 8
	DefaultQueue    = 1000
	DefaultScale    = 1.0
	DefaultChannels = 20
	DefaultSeed     = 1
	// DefaultEventCost and DefaultConnCost are the WebSocket costs of Config, before Scale.
	DefaultEventCost = 100 * time.Microsecond
	DefaultConnCost  = 100 * time.Microsecond
)

// Config sets the capacity model and the initial content. Zero values get defaults (see WithDefaults).
type Config struct {
	// Workers is the number of requests served at once (the app's worker pool); default 8.
	Workers int
	// Queue is the number of requests allowed to wait for a worker; a request that finds all workers
	// busy and Queue requests already waiting is answered 503 at once. Default 1000; a negative value
	// means no queue at all (503 whenever every worker is busy).
	Queue int
	// Scale multiplies every endpoint's service time: 2.0 is twice as slow, so half the capacity.
	// Default 1.0; values <= 0 get the default.
	Scale float64
	// Channels is the number of public channels created at start; default 20.
	Channels int
	// Seed seeds the store's content (ids, seeded post texts, tokens); default 1.
	Seed int64
	// EventCost is the worker time, before Scale, of delivering one WebSocket event to one connection:
	// a request that causes events (CreatePost, SaveReaction, ViewChannel) holds its worker that much
	// longer per connection reached; a WebSocket action's events (typing) take a worker of their own.
	// Default 0.1 ms; a negative value means none.
	EventCost time.Duration
	// ConnCost is the worker time, before Scale, that each open WebSocket connection costs per second
	// (keep-alives, presence): once a second a worker is held for ConnCost times the connections open.
	// Default 0.1 ms; a negative value means none.
	ConnCost time.Duration
	// LoginCost is worker time added to every sign-up (CreateUser) and
	// login, not scaled: a password hashed on purpose slowly, as Mattermost
	// 11's PBKDF2 (~0.5 s of CPU a login) or Synapse's bcrypt do. It bounds
	// how fast the server sets users up, apart from how many set-up users
	// it serves. Default 0: none.
	LoginCost time.Duration
	// HashRounds makes every sign-up and login hash its password with
	// PBKDF2-SHA256 at that many rounds, real CPU in a function of its own
	// (hashPassword) that a CPU profile names: Mattermost 11 hashes at
	// 600,000. The hash runs while the request holds its worker, during
	// its service time: one longer than that holds the worker longer, and
	// the machine's cores bound how many run at once. Default 0: a single
	// SHA-256.
	HashRounds int
	// Pprof serves Go's profiles at /debug/pprof/ (net/http/pprof), as a
	// Go server's debug listener does: headroom's --profile reads them.
	Pprof bool
}

// WithDefaults returns c with every zero (or, for Scale, non-positive) field set to its default.
// A negative Queue, EventCost or ConnCost is kept: it means none.
func (c Config) WithDefaults() Config {
	if c.Workers <= 0 {
		c.Workers = DefaultWorkers
	}
	if c.Queue == 0 {
		c.Queue = DefaultQueue
	}
	if c.Scale <= 0 {
		c.Scale = DefaultScale
	}
	if c.Channels <= 0 {
		c.Channels = DefaultChannels
	}
	if c.Seed == 0 {
		c.Seed = DefaultSeed
	}
	if c.EventCost == 0 {
		c.EventCost = DefaultEventCost
	}
	if c.ConnCost == 0 {
		c.ConnCost = DefaultConnCost
	}
	return c
}

// storeCall is one modelled store (database) call of a route: the name reported in the
// mattermost_db_store_time metric's method label and its service time before Scale.
type storeCall struct {
	method string
	time   time.Duration
}

// route is one row of the service-time table: the route's name (the metrics' handler label), its HTTP
// pattern, whether it needs a session, its time spent outside the store (before Scale) and its store
// calls. Its total service time is app plus the sum of the store calls.
type route struct {
	name    string
	method  string
	path    string
	auth    bool
	app     time.Duration
	store   []storeCall
	handler func(*Server, *call) reply
}

func (r route) total() time.Duration {
	t := r.app
	for _, sc := range r.store {
		t += sc.time
	}
	return t
}

const ms = time.Millisecond

// routeTable is the single table of routes and their service times (before Scale). docs/TESTBED.md
// repeats it; a test keeps the two equal.
func routeTable() []route {
	return []route{
		{"CreateUser", "POST", "/api/v4/users", false, 8 * ms, []storeCall{
			{"UserStore.Save", 4 * ms}, {"ChannelStore.SaveMember", 3 * ms}}, (*Server).createUser},
		{"Login", "POST", "/api/v4/users/login", false, 15 * ms, []storeCall{
			{"UserStore.GetForLogin", 2 * ms}, {"SessionStore.Save", 3 * ms}}, (*Server).login},
		{"GetMe", "GET", "/api/v4/users/me", true, ms / 2, []storeCall{
			{"UserStore.Get", ms / 2}}, (*Server).getMe},
		{"GetMyChannels", "GET", "/api/v4/users/me/channels", true, 1 * ms, []storeCall{
			{"ChannelStore.GetChannels", 2 * ms}}, (*Server).getMyChannels},
		{"GetChannelPosts", "GET", "/api/v4/channels/{id}/posts", true, 1 * ms, []storeCall{
			{"PostStore.GetPosts", 3 * ms}}, (*Server).getChannelPosts},
		{"ViewChannel", "POST", "/api/v4/channels/members/me/view", true, 1 * ms, []storeCall{
			{"ChannelStore.UpdateLastViewedAt", 2 * ms}}, (*Server).viewChannel},
		{"GetChannelUnread", "GET", "/api/v4/users/me/channels/{id}/unread", true, ms / 2, []storeCall{
			{"ChannelStore.GetChannelUnread", 3 * ms / 2}}, (*Server).getChannelUnread},
		{"CreatePost", "POST", "/api/v4/posts", true, 1 * ms, []storeCall{
			{"PostStore.Save", 3 * ms}, {"ChannelStore.IncrementMsgCount", 1 * ms},
			{"ThreadStore.MaintainMembership", 1 * ms}}, (*Server).createPost},
		{"PatchPost", "PUT", "/api/v4/posts/{id}/patch", true, 1 * ms, []storeCall{
			{"PostStore.GetSingle", 1 * ms}, {"PostStore.Update", 3 * ms}}, (*Server).patchPost},
		{"DeletePost", "DELETE", "/api/v4/posts/{id}", true, 1 * ms, []storeCall{
			{"PostStore.GetSingle", 1 * ms}, {"PostStore.Delete", 3 * ms}}, (*Server).deletePost},
		{"GetPostThread", "GET", "/api/v4/posts/{id}/thread", true, 1 * ms, []storeCall{
			{"PostStore.Get", 3 * ms}}, (*Server).getPostThread},
		{"SaveReaction", "POST", "/api/v4/reactions", true, 1 * ms, []storeCall{
			{"PostStore.GetSingle", 1 * ms}, {"ReactionStore.Save", 2 * ms}}, (*Server).saveReaction},
		{"GetThreads", "GET", "/api/v4/users/me/threads", true, 1 * ms, []storeCall{
			{"ThreadStore.GetThreadsForUser", 7 * ms}}, (*Server).getThreads},
		{"UpdateThreadRead", "PUT", "/api/v4/users/me/threads/{post_id}/read", true, 1 * ms, []storeCall{
			{"ThreadStore.MarkAsRead", 2 * ms}}, (*Server).updateThreadRead},
		{"SearchUsers", "POST", "/api/v4/users/search", true, 1 * ms, []storeCall{
			{"UserStore.Search", 5 * ms}}, (*Server).searchUsers},
		{"SearchPosts", "POST", "/api/v4/posts/search", true, 2 * ms, []storeCall{
			{"PostStore.Search", 23 * ms}}, (*Server).searchPosts},
		{"CreateDirectChannel", "POST", "/api/v4/channels/direct", true, 2 * ms, []storeCall{
			{"ChannelStore.GetByName", 1 * ms}, {"ChannelStore.SaveDirectChannel", 4 * ms}}, (*Server).createDirectChannel},
		{"JoinChannel", "POST", "/api/v4/channels/{id}/members", true, 1 * ms, []storeCall{
			{"ChannelStore.Get", 1 * ms}, {"ChannelStore.SaveMember", 3 * ms}}, (*Server).joinChannel},
	}
}

// Routes returns the route names, sorted. They are the values of the handler label of
// mattermost_api_time and the keys ServiceTime, Capacity and Ceiling accept.
func Routes() []string {
	rt := routeTable()
	names := make([]string, len(rt))
	for i, r := range rt {
		names[i] = r.name
	}
	sort.Strings(names)
	return names
}

// scaled returns d multiplied by scale, rounded to the nanosecond.
func scaled(d time.Duration, scale float64) time.Duration {
	return time.Duration(float64(d)*scale + 0.5)
}

// ServiceTime returns the modelled service time of the named route (see Routes), after Scale: the time
// a request holds its worker, from getting the worker until its reply is ready. It returns 0 for a name
// that is not a route.
func (s *Server) ServiceTime(route string) time.Duration {
	r, ok := s.routes[route]
	if !ok {
		return 0
	}
	return r.service
}

// meanServiceTime returns the mean service time S of one request drawn from mix, in seconds:
// Σ w_r·ServiceTime(r) / Σ w_r over the routes of mix with a positive weight. Names that are not routes
// and weights <= 0 are ignored; it returns 0 if nothing is left.
func (s *Server) meanServiceTime(mix map[string]float64) float64 {
	var sum, weights float64
	for name, w := range mix {
		r, ok := s.routes[name]
		if !ok || !(w > 0) {
			continue
		}
		sum += w * r.service.Seconds()
		weights += w
	}
	if weights == 0 {
		return 0
	}
	return sum / weights
}

// Capacity returns the throughput, in requests per second, the server completes when saturated by
// requests drawn from mix (relative weights by route name, see Routes):
//
//	X_max = Workers / S,  S = Σ w_r·ServiceTime(r) / Σ w_r  (seconds)
//
// Names that are not routes and weights <= 0 are ignored; it returns 0 if no route is left. The server
// holds this figure however late its timers fire, as long as its CPU keeps up (see pool).
func (s *Server) Capacity(mix map[string]float64) float64 {
	S := s.meanServiceTime(mix)
	if S == 0 {
		return 0
	}
	return float64(s.cfg.Workers) / S
}

// Ceiling returns the known ceiling, in concurrent users, of a closed-model scenario in which each user
// makes one request drawn from mix and then thinks for meanThink on average:
//
//	N* = Workers · (Z + S) / S,  Z = meanThink, S = mean service time as in Capacity (seconds)
//
// Below N* a request finds a free worker and takes S; above it the workers are saturated, throughput
// stays at Capacity(mix) and the mean response time grows linearly, R = N·S/Workers − Z. Names that are
// not routes and weights <= 0 are ignored; it returns 0 if no route is left.
func (s *Server) Ceiling(mix map[string]float64, meanThink time.Duration) float64 {
	S := s.meanServiceTime(mix)
	if S == 0 {
		return 0
	}
	return float64(s.cfg.Workers) * (meanThink.Seconds() + S) / S
}

// ConnectedCeiling returns the users N at which the mean response time reaches rt when each of them
// also holds one WebSocket connection (docs/TESTBED.md, "What connections cost"). A request of route r
// then takes S_r + EventCost·reach(r, N), reach being the connections its events go to at N users, and
// the connections' upkeep takes N·ConnCost of worker time a second, so past saturation
//
//	R(N) = N·S(N) / (Workers − N·ConnCost) − Z,  S(N) = Σ w_r·(S_r + EventCost·reach(r, N)) / Σ w_r
//
// while below it R(N) = S(N), which grows with N too. The answer is the N at which the larger of the two
// reaches rt: the smaller of the N solving S(N) = rt and the N solving N·S(N) = (Z + rt)·(Workers −
// N·ConnCost). With rt = S(N) it is the saturation point, N·(S(N)/(Z + S(N)) + ConnCost) = Workers.
// reach may be nil (no events). It returns 0 if mix names no route.
func (s *Server) ConnectedCeiling(mix map[string]float64, meanThink, rt time.Duration, reach func(route string, n float64) float64) float64 {
	var weights float64
	for name, w := range mix {
		if _, ok := s.routes[name]; ok && w > 0 {
			weights += w
		}
	}
	if weights == 0 {
		return 0
	}
	service := func(n float64) float64 { // S(N), seconds
		var sum float64
		for name, w := range mix {
			r, ok := s.routes[name]
			if !ok || !(w > 0) {
				continue
			}
			x := r.service.Seconds()
			if reach != nil {
				x += s.eventCost.Seconds() * reach(name, n)
			}
			sum += w * x
		}
		return sum / weights
	}
	z, c, workers := (meanThink + rt).Seconds(), s.connCost.Seconds(), float64(s.cfg.Workers)
	queued := func(n float64) float64 { return n*service(n) - z*(workers-n*c) }
	served := func(n float64) float64 { return service(n) - rt.Seconds() }
	return min(root(queued), root(served))
}

// root returns the n >= 0 at which f, increasing, passes 0 (a bound of 1e9 if it does not).
func root(f func(n float64) float64) float64 {
	lo, hi := 0.0, 1.0
	for f(hi) <= 0 && hi < 1e9 {
		lo, hi = hi, 2*hi
	}
	for range 100 {
		mid := (lo + hi) / 2
		if f(mid) <= 0 {
			lo = mid
		} else {
			hi = mid
		}
	}
	return (lo + hi) / 2
}
