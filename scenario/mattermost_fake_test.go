package scenario

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"image"
	"image/jpeg"
	_ "image/png" // an upload's size, as the server reads it
	"io"
	"maps"
	"mime"
	"net/http"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

// fakeMattermost answers the Mattermost API v4 calls examples/mattermost.star
// makes, with the statuses and in the shapes Mattermost 11.4 answers them
// (its channels/api4 handlers and public/model types), from a small
// in-memory store: enough to run every helper of the script's and check
// each call it makes, in the test command. Where the real server's answer
// depends on its state, the fake keeps that state: a member's last view of
// a channel (the unread posts are those after it), thread memberships,
// preferences, drafts, uploads, the system post a join makes. It is no
// model of the server's costs: the testbed is that, in its own dialect.
// Safe for concurrent use.
type fakeMattermost struct {
	mu       sync.Mutex
	table    map[string]fakeHandler              // route pattern -> handler (routes)
	n        int                                 // ids made
	users    map[string]*fakeUser                // id -> user
	names    map[string]string                   // username -> id
	tokens   map[string]string                   // session token -> user id
	team     map[string]bool                     // the team's members
	channels map[string]*fakeChannel             // id -> channel
	posts    map[string]*fakePost                // id -> post, a deleted one too
	files    map[string]*fakeFile                // id -> upload
	prefs    map[string]map[[2]string]string     // user -> (category, name) -> value
	drafts   map[string]map[[2]string]*fakeDraft // user -> (channel, root) -> draft
	follows  map[string]map[string]*fakeFollow   // root post -> user -> thread membership
	conns    map[string][]*fakeConn              // user -> its WebSockets
	hits     map[string]int                      // route pattern, or "WS " + action -> requests
	wrong    []string                            // requests the real server would refuse
	thumb    []byte                              // a thumbnail's and a preview's bytes: a JPEG
}

type fakeUser struct {
	ID, Name string
	Created  int64
	Picture  int64 // last_picture_update: 0 until the user sets one, as for every account a sign-up makes
}

type fakeChannel struct {
	ID, Name, Type string // Type "O" (public) or "D" (direct)
	Created        int64
	Members        map[string]*fakeMember // user id -> membership
	Posts          []string               // oldest first
}

type fakeMember struct {
	Viewed int64 // last_viewed_at: 0 until the user views the channel or posts in it
}

type fakePost struct {
	ID, Channel, User, Root, Message, Type, Pending string
	Created, Updated, Edited, Deleted               int64
	Files                                           []string
}

type fakeFile struct {
	ID, User, Channel, Post, Name string
	Size, Width, Height           int
	Image                         bool // decoded as one: it has a thumbnail and a preview
	Created                       int64
}

type fakeDraft struct {
	Message          string
	Files            []string
	Created, Updated int64
}

type fakeFollow struct {
	Following bool
	Viewed    int64 // read up to
}

type fakeConn struct {
	ws  *websocket.Conn
	seq int64 // the last event's
}

const fakeTeam = "team0000000000000000000000"

// newFakeMattermost makes the fake: the team "headroom" with its
// town-square and off-topic, and its admin "sysadmin", who has set a
// profile picture.
func newFakeMattermost() *fakeMattermost {
	m := &fakeMattermost{users: map[string]*fakeUser{}, names: map[string]string{}, tokens: map[string]string{}, team: map[string]bool{},
		channels: map[string]*fakeChannel{}, posts: map[string]*fakePost{}, files: map[string]*fakeFile{},
		prefs: map[string]map[[2]string]string{}, drafts: map[string]map[[2]string]*fakeDraft{},
		follows: map[string]map[string]*fakeFollow{}, conns: map[string][]*fakeConn{}, hits: map[string]int{}}
	m.table = m.routes()
	var b bytes.Buffer
	jpeg.Encode(&b, image.NewGray(image.Rect(0, 0, 4, 3)), nil)
	m.thumb = b.Bytes()
	admin := m.addUser("sysadmin")
	admin.Picture = m.now()
	m.team[admin.ID] = true
	for _, name := range []string{"town-square", "off-topic"} {
		c := m.addChannel(name, "O")
		c.Members[admin.ID] = &fakeMember{}
	}
	return m
}

// handler serves the API and its WebSocket.
func (m *fakeMattermost) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/v4/websocket", m.websocket)
	mux.HandleFunc("/", m.serve)
	return mux
}

// fakeReq is one API request: the session's user, the body (its JSON decoded), the path's values.
type fakeReq struct {
	*http.Request
	me   string
	body any
	raw  []byte
}

// user is the path's {uid}, "me" being the session's user, as the server reads it.
func (r *fakeReq) user() string {
	if u := r.PathValue("uid"); u != "me" {
		return u
	}
	return r.me
}

func (r *fakeReq) field(k string) string {
	s, _ := r.body.(map[string]any)[k].(string)
	return s
}

// strings is the body's list of strings (ids, names).
func (r *fakeReq) strings() []string {
	var out []string
	list, _ := r.body.([]any)
	for _, v := range list {
		s, _ := v.(string)
		out = append(out, s)
	}
	return out
}

func (r *fakeReq) query(k string, def int) int {
	if n, err := strconv.Atoi(r.URL.Query().Get(k)); err == nil {
		return n
	}
	return def
}

type fakeHandler func(r *fakeReq) (int, any)

// fakeToken is a login's reply: the user, and the session's token in the header "Token".
type fakeToken struct {
	token string
	user  any
}

// fakeBytes is a reply that is not JSON: an image, with its headers.
type fakeBytes struct {
	header map[string]string
	body   []byte
}

// apiError is the server's error reply (model.AppError).
func apiError(status int, id, message string) (int, any) {
	return status, map[string]any{"id": id, "message": message, "detailed_error": "", "request_id": "r", "status_code": status}
}

func forbidden() (int, any) {
	return apiError(403, "api.context.permissions.app_error", "You do not have the appropriate permissions.")
}

func statusOK() (int, any) { return 200, map[string]any{"status": "OK"} }

// invalid is the reply to a body without what it needs (Context.SetInvalidParam).
func invalid(param string) (int, any) {
	return apiError(400, "api.context.invalid_body_param.app_error", "Invalid or missing "+param+" in request body.")
}

func postNotFound() (int, any) {
	return apiError(404, "app.post.get.app_error", "Unable to get the post.")
}

// serve answers one API request with the handler of the route it matches
// (route), after a millisecond of the server's time, so that no two
// requests in a row share a timestamp (the test runs in virtual time).
func (m *fakeMattermost) serve(w http.ResponseWriter, r *http.Request) {
	time.Sleep(time.Millisecond)
	raw, _ := io.ReadAll(r.Body)
	m.mu.Lock()
	defer m.mu.Unlock()
	pattern := m.route(r)
	if pattern == "" {
		m.wrong = append(m.wrong, "no such route: "+r.Method+" "+r.URL.Path)
		http.NotFound(w, r)
		return
	}
	m.hits[pattern]++
	me := m.tokens[strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")]
	if me == "" && pattern != "POST /api/v4/users" && pattern != "POST /api/v4/users/login" {
		m.wrong = append(m.wrong, pattern+": no session")
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	req := &fakeReq{Request: r, me: me, raw: raw}
	if ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); ct == "application/json" && json.Unmarshal(raw, &req.body) != nil {
		m.wrong = append(m.wrong, pattern+": a body that is not JSON")
	}
	status, reply := m.table[pattern](req)
	switch v := reply.(type) {
	case fakeToken:
		w.Header().Set("Token", v.token)
		reply = v.user
	case fakeBytes:
		for k, x := range v.header {
			w.Header().Set(k, x)
		}
		w.WriteHeader(status)
		w.Write(v.body)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(reply)
}

// route is the pattern of m.table that serves r, its {name} segments set
// as r's path values: of those that fit, the one with a literal segment
// where the others have a wildcard, leftmost first (/users/username/{name}
// before /users/{uid}/status); "" for none.
func (m *fakeMattermost) route(r *http.Request) string {
	segs := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	best, bestSegs := "", []string(nil)
	for pattern := range m.table {
		method, p, _ := strings.Cut(pattern, " ")
		ps := strings.Split(strings.Trim(p, "/"), "/")
		if method != r.Method || len(ps) != len(segs) {
			continue
		}
		fits := true
		for i, s := range ps {
			if !strings.HasPrefix(s, "{") && s != segs[i] {
				fits = false
				break
			}
		}
		if fits && (best == "" || moreLiteral(ps, bestSegs)) {
			best, bestSegs = pattern, ps
		}
	}
	for i, s := range bestSegs {
		if strings.HasPrefix(s, "{") {
			r.SetPathValue(strings.Trim(s, "{}"), segs[i])
		}
	}
	return best
}

// moreLiteral reports whether pattern a has a literal segment where b has a wildcard, before b has one where a has.
func moreLiteral(a, b []string) bool {
	for i := range a {
		if wa, wb := strings.HasPrefix(a[i], "{"), strings.HasPrefix(b[i], "{"); wa != wb {
			return wb
		}
	}
	return false
}

// now is the server's clock in ms (the test's virtual time).
func (m *fakeMattermost) now() int64 { return time.Now().UnixMilli() }

// id makes an id of the server's shape: 26 characters, letters and digits.
func (m *fakeMattermost) id(kind string) string {
	m.n++
	return fmt.Sprintf("%s%0*d", kind, 26-len(kind), m.n)
}

func (m *fakeMattermost) addUser(name string) *fakeUser {
	u := &fakeUser{ID: m.id("u"), Name: name, Created: m.now()}
	m.users[u.ID], m.names[name] = u, u.ID
	return u
}

func (m *fakeMattermost) addChannel(name, typ string) *fakeChannel {
	c := &fakeChannel{ID: m.id("c"), Name: name, Type: typ, Created: m.now(), Members: map[string]*fakeMember{}}
	m.channels[c.ID] = c
	return c
}

func (m *fakeMattermost) channelNamed(name string) *fakeChannel {
	for _, c := range m.channels {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// canRead: a member reads a channel, and any member of the team a public one.
func (m *fakeMattermost) canRead(user string, c *fakeChannel) bool {
	return c != nil && (c.Members[user] != nil || c.Type == "O" && m.team[user])
}

// join adds user to c, and posts the system message the server posts for it (system_join_team in
// town-square, when the user joined the team); a member already changes nothing.
func (m *fakeMattermost) join(user string, c *fakeChannel) {
	if c.Members[user] != nil {
		return
	}
	c.Members[user] = &fakeMember{}
	typ, what := "system_join_channel", "channel"
	if c.Name == "town-square" {
		typ, what = "system_join_team", "team"
	}
	m.addPost(&fakePost{User: user, Channel: c.ID, Type: typ, Message: m.users[user].Name + " joined the " + what + "."})
}

// addPost stores p, follows its thread for its author and the root's,
// and sends it to the channel's members as a "posted" event.
func (m *fakeMattermost) addPost(p *fakePost) *fakePost {
	p.ID, p.Created = m.id("p"), m.now()
	p.Updated = p.Created
	c := m.channels[p.Channel]
	m.posts[p.ID], c.Posts = p, append(c.Posts, p.ID)
	for _, f := range p.Files {
		m.files[f].Post = p.ID
	}
	if p.Root != "" { // ThreadAutoFollow: the replier follows, and the root's author at the first reply
		f := m.follows[p.Root]
		if f == nil {
			f = map[string]*fakeFollow{}
			m.follows[p.Root] = f
		}
		if root := m.posts[p.Root]; f[root.User] == nil {
			f[root.User] = &fakeFollow{Following: true, Viewed: root.Created}
		}
		f[p.User] = &fakeFollow{Following: true, Viewed: p.Created}
	}
	raw, _ := json.Marshal(m.postJSON(p))
	m.broadcast(c, "", "posted", map[string]any{"post": string(raw), "channel_type": c.Type, "channel_name": c.Name,
		"channel_display_name": c.Name, "sender_name": "@" + m.users[p.User].Name, "team_id": m.teamOf(c), "set_online": true})
	return p
}

// seedPermalinks posts in every channel that has posts one that links to
// its first: posts with a permalink come from 1% of the script's
// messages, too few for its ClickPermalink to find one in three rounds.
// Its author is the channel's first poster; it is unread for everyone.
func (m *fakeMattermost) seedPermalinks() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, cid := range slices.Sorted(maps.Keys(m.channels)) {
		c := m.channels[cid]
		for _, id := range c.Posts {
			if p := m.posts[id]; p.Type == "" && p.Root == "" {
				m.addPost(&fakePost{User: p.User, Channel: c.ID, Message: "see http://127.0.0.1:18065/headroom/pl/" + p.ID + " again"})
				break
			}
		}
	}
}

func (m *fakeMattermost) teamOf(c *fakeChannel) string {
	if c.Type == "D" {
		return ""
	}
	return fakeTeam
}

// broadcast sends an event to the WebSockets of c's members but omit.
func (m *fakeMattermost) broadcast(c *fakeChannel, omit, event string, data map[string]any) {
	omitted := map[string]bool{}
	if omit != "" {
		omitted[omit] = true
	}
	for _, id := range slices.Sorted(maps.Keys(c.Members)) {
		if id == omit {
			continue
		}
		for _, ws := range m.conns[id] {
			ws.seq++
			ws.ws.WriteJSON(map[string]any{"event": event, "data": data, "seq": ws.seq,
				"broadcast": map[string]any{"omit_users": omitted, "user_id": "", "channel_id": c.ID, "team_id": ""}})
		}
	}
}

// The answers' shapes: model.User, Team, TeamMember, Channel, ChannelMember, Post, FileInfo, ThreadResponse, Status.

func (m *fakeMattermost) userJSON(u *fakeUser, me string) map[string]any {
	j := map[string]any{"id": u.ID, "create_at": u.Created, "update_at": u.Created, "delete_at": 0, "username": u.Name, "auth_service": "",
		"nickname": "", "first_name": "", "last_name": "", "position": "", "roles": "system_user", "locale": "en", "disable_welcome_email": false}
	if u.Picture != 0 {
		j["last_picture_update"] = u.Picture
	}
	if u.ID == me { // the others' addresses are hidden (PrivacySettings.ShowEmailAddress)
		j["email"] = u.Name + "@headroom.invalid"
	}
	return j
}

func (m *fakeMattermost) usersJSON(ids []string, me string) []any {
	out := []any{}
	for _, id := range ids {
		if u := m.users[id]; u != nil {
			out = append(out, m.userJSON(u, me))
		}
	}
	return out
}

// usersNamed are the users whose username starts with prefix, by username.
func (m *fakeMattermost) usersNamed(prefix string) []string {
	var out []string
	for _, name := range slices.Sorted(maps.Keys(m.names)) {
		if strings.HasPrefix(name, prefix) {
			out = append(out, m.names[name])
		}
	}
	return out
}

func teamJSON() map[string]any {
	return map[string]any{"id": fakeTeam, "create_at": 0, "update_at": 0, "delete_at": 0, "display_name": "Headroom", "name": "headroom",
		"description": "", "email": "", "type": "O", "company_name": "", "allowed_domains": "", "invite_id": "i", "allow_open_invite": true,
		"scheme_id": nil, "group_constrained": nil, "policy_id": nil, "cloud_limits_archived": false}
}

func teamMemberJSON(user string) map[string]any {
	return map[string]any{"team_id": fakeTeam, "user_id": user, "roles": "team_user", "delete_at": 0, "scheme_guest": false,
		"scheme_user": true, "scheme_admin": false, "explicit_roles": ""}
}

func (m *fakeMattermost) channelJSON(c *fakeChannel) map[string]any {
	last, roots := c.Created, 0
	for _, id := range c.Posts {
		last = m.posts[id].Created
		if m.posts[id].Root == "" {
			roots++
		}
	}
	display := c.Name
	if c.Type == "D" {
		display = ""
	}
	return map[string]any{"id": c.ID, "create_at": c.Created, "update_at": c.Created, "delete_at": 0, "team_id": m.teamOf(c), "type": c.Type,
		"display_name": display, "name": c.Name, "header": "", "purpose": "", "last_post_at": last, "last_root_post_at": last,
		"total_msg_count": len(c.Posts), "total_msg_count_root": roots, "creator_id": "", "scheme_id": nil, "props": nil,
		"group_constrained": nil, "shared": nil, "policy_id": nil}
}

func (m *fakeMattermost) channelsJSON(cs []*fakeChannel) []any {
	out := []any{}
	for _, c := range cs {
		out = append(out, m.channelJSON(c))
	}
	return out
}

// channelsOf are user's channels (the team's and its direct ones), by name.
func (m *fakeMattermost) channelsOf(user string) []*fakeChannel {
	var out []*fakeChannel
	for _, c := range m.channels {
		if c.Members[user] != nil {
			out = append(out, c)
		}
	}
	slices.SortFunc(out, func(a, b *fakeChannel) int { return strings.Compare(a.Name, b.Name) })
	return out
}

func (m *fakeMattermost) memberJSON(c *fakeChannel, user string) map[string]any {
	return map[string]any{"channel_id": c.ID, "user_id": user, "roles": "channel_user", "last_viewed_at": c.Members[user].Viewed,
		"msg_count": len(c.Posts), "mention_count": 0, "mention_count_root": 0, "urgent_mention_count": 0, "msg_count_root": 0,
		"notify_props":   map[string]any{"desktop": "default", "push": "default", "email": "default", "mark_unread": "all"},
		"last_update_at": c.Created, "scheme_guest": false, "scheme_user": true, "scheme_admin": false, "explicit_roles": ""}
}

func (m *fakeMattermost) postJSON(p *fakePost) map[string]any {
	meta := map[string]any{}
	if len(p.Files) > 0 {
		files := []any{}
		for _, f := range p.Files {
			files = append(files, m.fileJSON(m.files[f]))
		}
		meta["files"] = files
	}
	j := map[string]any{"id": p.ID, "create_at": p.Created, "update_at": p.Updated, "edit_at": p.Edited, "delete_at": p.Deleted, "is_pinned": false,
		"user_id": p.User, "channel_id": p.Channel, "root_id": p.Root, "original_id": "", "message": p.Message, "type": p.Type,
		"props": map[string]any{}, "hashtags": "", "pending_post_id": p.Pending, "reply_count": len(m.replies(p)), "last_reply_at": 0,
		"participants": nil, "metadata": meta}
	if len(p.Files) > 0 {
		j["file_ids"] = p.Files
	}
	if p.Type != "" {
		j["props"] = map[string]any{"username": m.users[p.User].Name}
	}
	return j
}

func (m *fakeMattermost) fileJSON(f *fakeFile) map[string]any {
	ext := strings.TrimPrefix(strings.ToLower(path.Ext(f.Name)), ".")
	j := map[string]any{"id": f.ID, "user_id": f.User, "channel_id": f.Channel, "create_at": f.Created, "update_at": f.Created,
		"delete_at": 0, "name": f.Name, "extension": ext, "size": f.Size, "mime_type": mime.TypeByExtension("." + ext),
		"mini_preview": nil, "remote_id": nil, "archived": false}
	if f.Post != "" {
		j["post_id"] = f.Post
	}
	if f.Image {
		j["width"], j["height"], j["has_preview_image"] = f.Width, f.Height, true
	}
	return j
}

func statusJSON(user string, online bool) map[string]any {
	s := "offline"
	if online {
		s = "online"
	}
	return map[string]any{"user_id": user, "status": s, "manual": false, "last_activity_at": 0, "dnd_end_time": 0}
}

// replies are p's replies, oldest first, but those deleted.
func (m *fakeMattermost) replies(p *fakePost) []*fakePost {
	var out []*fakePost
	if p.Root != "" {
		return nil
	}
	for _, id := range m.channels[p.Channel].Posts {
		if r := m.posts[id]; r.Root == p.ID && r.Deleted == 0 {
			out = append(out, r)
		}
	}
	return out
}

// postList is a post list as the server answers one: the posts of ids, newest first, and more posts
// (a thread's) in its posts but not its order.
func (m *fakeMattermost) postList(ids []string, more ...string) map[string]any {
	order, posts := []string{}, map[string]any{}
	for _, id := range slices.Backward(ids) {
		order, posts[id] = append(order, id), m.postJSON(m.posts[id])
	}
	for _, id := range more {
		posts[id] = m.postJSON(m.posts[id])
	}
	return map[string]any{"order": order, "posts": posts, "next_post_id": "", "prev_post_id": "", "has_next": false,
		"first_inaccessible_post_time": 0}
}

// channelPosts are c's posts, oldest first: those deleted only when asked (a list since a time has
// them), its roots only with collapsed threads (CRT), as the client asks.
func (m *fakeMattermost) channelPosts(c *fakeChannel, r *fakeReq, deleted bool) []string {
	crt := r.URL.Query().Get("collapsedThreads") == "true"
	return slices.DeleteFunc(slices.Clone(c.Posts), func(id string) bool {
		p := m.posts[id]
		return p.Deleted != 0 && !deleted || p.Root != "" && crt
	})
}

// page is the page-th page of per_page posts of ids (oldest first), counted from the newest.
func page(ids []string, r *fakeReq) []string {
	per := r.query("per_page", 60)
	hi := len(ids) - r.query("page", 0)*per
	if hi <= 0 {
		return nil
	}
	return ids[max(0, hi-per):hi]
}

// threads are the roots of the threads user follows in the team (its direct channels' too), the latest
// reply first; lastReply the time of a root's.
func (m *fakeMattermost) threads(user string) (ids []string, lastReply func(string) int64) {
	last := map[string]int64{}
	for root, f := range m.follows {
		p := m.posts[root]
		if p.Deleted != 0 || f[user] == nil || !f[user].Following || !m.canRead(user, m.channels[p.Channel]) {
			continue
		}
		for _, r := range m.replies(p) {
			last[root] = max(last[root], r.Created)
		}
		if last[root] > 0 {
			ids = append(ids, root)
		}
	}
	slices.SortFunc(ids, func(a, b string) int {
		if c := cmp.Compare(last[b], last[a]); c != 0 {
			return c
		}
		return strings.Compare(b, a)
	})
	return ids, func(id string) int64 { return last[id] }
}

func (m *fakeMattermost) threadJSON(root, user string, lastReply int64) map[string]any {
	p, f := m.posts[root], m.follows[root][user]
	people, unread := []any{}, 0
	seen := map[string]bool{}
	for _, r := range m.replies(p) {
		if !seen[r.User] {
			seen[r.User] = true
			people = append(people, map[string]any{"id": r.User})
		}
		if r.Created > f.Viewed {
			unread++
		}
	}
	return map[string]any{"id": root, "reply_count": len(m.replies(p)), "last_reply_at": lastReply, "last_viewed_at": f.Viewed,
		"participants": people, "post": m.postJSON(p), "unread_replies": unread, "unread_mentions": 0, "is_urgent": false, "delete_at": 0}
}

func (m *fakeMattermost) draftJSON(user string, key [2]string, d *fakeDraft) map[string]any {
	j := map[string]any{"create_at": d.Created, "update_at": d.Updated, "delete_at": 0, "user_id": user, "channel_id": key[0],
		"root_id": key[1], "message": d.Message, "type": "", "props": map[string]any{}}
	if len(d.Files) > 0 {
		j["file_ids"] = d.Files
	}
	return j
}

func (m *fakeMattermost) routes() map[string]fakeHandler {
	channel := func(r *fakeReq) *fakeChannel { return m.channels[r.PathValue("cid")] }
	self := func(r *fakeReq) bool { return r.user() == r.me }
	ok := func(v any) fakeHandler { return func(*fakeReq) (int, any) { return 200, v } }
	return map[string]fakeHandler{
		"POST /api/v4/users": func(r *fakeReq) (int, any) {
			name := r.field("username")
			if r.field("email") == "" || r.field("password") == "" || name == "" {
				return apiError(400, "model.user.is_valid.email.app_error", "Invalid email.")
			}
			if m.names[name] != "" {
				return apiError(400, "app.user.save.username_exists.app_error", "An account with that username already exists.")
			}
			return 201, m.userJSON(m.addUser(name), "")
		},
		"POST /api/v4/users/login": func(r *fakeReq) (int, any) {
			id := m.names[r.field("login_id")]
			if id == "" || r.field("password") == "" {
				return apiError(401, "api.user.login.invalid_credentials_email_username", "Enter a valid email or username and/or password.")
			}
			tok := m.id("t")
			m.tokens[tok] = id
			return 200, fakeToken{tok, m.userJSON(m.users[id], id)}
		},
		"GET /api/v4/users": func(r *fakeReq) (int, any) {
			ids := m.usersNamed("")
			per := r.query("per_page", 60)
			lo := min(len(ids), r.query("page", 0)*per)
			return 200, m.usersJSON(ids[lo:min(len(ids), lo+per)], r.me)
		},
		"GET /api/v4/users/{uid}": func(r *fakeReq) (int, any) {
			if u := m.users[r.user()]; u != nil {
				return 200, m.userJSON(u, r.me)
			}
			return apiError(404, "app.user.missing_account.const", "Unable to find the user.")
		},
		"GET /api/v4/users/username/{name}": func(r *fakeReq) (int, any) {
			if id := m.names[r.PathValue("name")]; id != "" {
				return 200, m.userJSON(m.users[id], r.me)
			}
			return apiError(404, "app.user.get_by_username.app_error", "Unable to find an existing account matching your username for this team.")
		},
		"POST /api/v4/users/ids": func(r *fakeReq) (int, any) {
			ids := r.strings()
			if len(ids) == 0 {
				return invalid("user_ids")
			}
			since := int64(r.query("since", 0))
			ids = slices.DeleteFunc(ids, func(id string) bool { return m.users[id] != nil && m.users[id].Created <= since })
			return 200, m.usersJSON(ids, r.me)
		},
		"POST /api/v4/users/usernames": func(r *fakeReq) (int, any) {
			var ids []string
			for _, name := range r.strings() {
				if id := m.names[name]; id != "" {
					ids = append(ids, id)
				}
			}
			return 200, m.usersJSON(ids, r.me)
		},
		"POST /api/v4/users/status/ids": func(r *fakeReq) (int, any) {
			ids := r.strings()
			if len(ids) == 0 {
				return invalid("user_ids")
			}
			out := []any{}
			for _, id := range ids {
				if len(id) != 26 {
					return invalid("user_ids")
				}
				if m.users[id] != nil {
					out = append(out, statusJSON(id, len(m.conns[id]) > 0))
				}
			}
			return 200, out
		},
		"GET /api/v4/users/{uid}/status": func(r *fakeReq) (int, any) { return 200, statusJSON(r.user(), len(m.conns[r.user()]) > 0) },
		"POST /api/v4/users/search": func(r *fakeReq) (int, any) {
			if r.field("term") == "" {
				return invalid("term")
			}
			return 200, m.usersJSON(m.usersNamed(r.field("term")), r.me)
		},
		"GET /api/v4/users/autocomplete": func(r *fakeReq) (int, any) {
			c := m.channels[r.URL.Query().Get("in_channel")]
			if c == nil || r.URL.Query().Get("in_team") != fakeTeam {
				return forbidden()
			}
			var in, out []string
			found := m.usersNamed(r.URL.Query().Get("name"))
			for _, id := range found[:min(len(found), r.query("limit", 100))] {
				if c.Members[id] != nil {
					in = append(in, id)
				} else if m.team[id] {
					out = append(out, id)
				}
			}
			return 200, map[string]any{"users": m.usersJSON(in, r.me), "out_of_channel": m.usersJSON(out, r.me)}
		},
		// a profile image: its etag is the user's last_picture_update, "0" for one never set
		"GET /api/v4/users/{uid}/image": func(r *fakeReq) (int, any) {
			u := m.users[r.user()]
			if u == nil {
				return apiError(404, "app.user.missing_account.const", "Unable to find the user.")
			}
			etag := strconv.FormatInt(u.Picture, 10)
			if r.Header.Get("If-None-Match") == etag {
				return 304, fakeBytes{header: map[string]string{"Etag": etag}}
			}
			return 200, fakeBytes{header: map[string]string{"Etag": etag, "Content-Type": "image/png", "Cache-Control": "max-age=86400, private"},
				body: []byte("\x89PNG\r\n\x1a\n")}
		},
		"GET /api/v4/users/{uid}/teams": func(r *fakeReq) (int, any) {
			if !self(r) {
				return forbidden()
			}
			return 200, []any{teamJSON()}
		},
		"GET /api/v4/users/{uid}/teams/members": func(r *fakeReq) (int, any) {
			if !self(r) {
				return forbidden()
			}
			return 200, []any{teamMemberJSON(r.me)}
		},
		"GET /api/v4/users/{uid}/teams/unread": func(r *fakeReq) (int, any) {
			if !self(r) {
				return forbidden()
			}
			return 200, []any{map[string]any{"team_id": fakeTeam, "msg_count": 0, "mention_count": 0, "mention_count_root": 0,
				"msg_count_root": 0, "thread_count": 0, "thread_mention_count": 0, "thread_urgent_mention_count": 0}}
		},
		"GET /api/v4/users/{uid}/preferences": func(r *fakeReq) (int, any) {
			if !self(r) {
				return forbidden()
			}
			out := []any{}
			for _, k := range slices.SortedFunc(maps.Keys(m.prefs[r.me]), compare2) {
				out = append(out, map[string]any{"user_id": r.me, "category": k[0], "name": k[1], "value": m.prefs[r.me][k]})
			}
			return 200, out
		},
		// a preference not set is a 400, as the store's error becomes (app.GetPreferenceByCategoryAndNameForUser)
		"GET /api/v4/users/{uid}/preferences/{category}/name/{name}": func(r *fakeReq) (int, any) {
			if !self(r) {
				return forbidden()
			}
			k := [2]string{r.PathValue("category"), r.PathValue("name")}
			if v, ok := m.prefs[r.me][k]; ok {
				return 200, map[string]any{"user_id": r.me, "category": k[0], "name": k[1], "value": v}
			}
			return apiError(400, "app.preference.get.app_error", "We encountered an error while finding preferences.")
		},
		"PUT /api/v4/users/{uid}/preferences": func(r *fakeReq) (int, any) {
			list, _ := r.body.([]any)
			if !self(r) || len(list) == 0 || len(list) > 100 {
				return invalid("preferences")
			}
			if m.prefs[r.me] == nil {
				m.prefs[r.me] = map[[2]string]string{}
			}
			for _, x := range list {
				p, _ := x.(map[string]any)
				if p["user_id"] != r.me {
					return apiError(403, "api.preference.update_preferences.set.app_error", "Unable to set user preferences.")
				}
				cat, _ := p["category"].(string)
				name, _ := p["name"].(string)
				value, _ := p["value"].(string)
				m.prefs[r.me][[2]string{cat, name}] = value
			}
			return statusOK()
		},
		"GET /api/v4/users/{uid}/teams/{tid}/channels": func(r *fakeReq) (int, any) {
			if !self(r) {
				return forbidden()
			}
			return 200, m.channelsJSON(m.channelsOf(r.me))
		},
		"GET /api/v4/users/{uid}/teams/{tid}/channels/members": func(r *fakeReq) (int, any) {
			if !self(r) {
				return forbidden()
			}
			out := []any{}
			for _, c := range m.channelsOf(r.me) {
				out = append(out, m.memberJSON(c, r.me))
			}
			return 200, out
		},
		// the default categories: favorites (empty), channels (public and private), direct messages
		"GET /api/v4/users/{uid}/teams/{tid}/channels/categories": func(r *fakeReq) (int, any) {
			if !self(r) {
				return forbidden()
			}
			ids := map[string][]string{"favorites": {}, "channels": {}, "direct_messages": {}}
			for _, c := range m.channelsOf(r.me) {
				kind := "channels"
				if c.Type == "D" {
					kind = "direct_messages"
				}
				ids[kind] = append(ids[kind], c.ID)
			}
			var cats, order []any
			for i, kind := range []string{"favorites", "channels", "direct_messages"} {
				id := fmt.Sprintf("%s_%s_%s", kind, r.me, fakeTeam)
				cats = append(cats, map[string]any{"id": id, "user_id": r.me, "team_id": fakeTeam, "sort_order": 10 * i, "sorting": "",
					"type": kind, "display_name": kind, "muted": false, "collapsed": false, "channel_ids": ids[kind]})
				order = append(order, id)
			}
			return 200, map[string]any{"categories": cats, "order": order}
		},
		"PUT /api/v4/users/{uid}/teams/{tid}/channels/categories/{cat}": func(r *fakeReq) (int, any) {
			if !self(r) || r.field("id") != r.PathValue("cat") || !strings.Contains(r.PathValue("cat"), r.me) {
				return invalid("category")
			}
			ids, _ := r.body.(map[string]any)["channel_ids"].([]any)
			for _, id := range ids {
				if c := m.channels[fmt.Sprint(id)]; c == nil || c.Members[r.me] == nil {
					return apiError(400, "app.channel.sidebar_categories.app_error", "Channel is not a member of this category's team.")
				}
			}
			return 200, r.body
		},
		"GET /api/v4/users/{uid}/teams/{tid}/threads": func(r *fakeReq) (int, any) {
			if !self(r) {
				return forbidden()
			}
			q := r.URL.Query()
			all, lastReply := m.threads(r.me)
			unread := slices.DeleteFunc(slices.Clone(all), func(id string) bool { return m.follows[id][r.me].Viewed >= lastReply(id) })
			res := map[string]any{"total": len(all), "total_unread_threads": len(unread), "total_unread_mentions": 0,
				"total_unread_urgent_mentions": 0, "threads": nil}
			if q.Get("threadsOnly") == "true" {
				res["total"], res["total_unread_threads"] = 0, 0
			}
			if q.Get("unread") == "true" {
				all = unread
			}
			if q.Get("totalsOnly") == "true" {
				return 200, res
			}
			if b := q.Get("before"); b != "" {
				t := lastReply(b)
				all = slices.DeleteFunc(all, func(id string) bool { return lastReply(id) >= t })
			}
			threads := []any{}
			for _, id := range all[:min(len(all), r.query("per_page", 30))] {
				threads = append(threads, m.threadJSON(id, r.me, lastReply(id)))
			}
			res["threads"] = threads
			return 200, res
		},
		"PUT /api/v4/users/{uid}/teams/{tid}/threads/{pid}/read/{ts}": func(r *fakeReq) (int, any) {
			p := m.posts[r.PathValue("pid")]
			if !self(r) || p == nil || !m.canRead(r.me, m.channels[p.Channel]) {
				return forbidden()
			}
			f := m.follows[p.ID][r.me]
			if f == nil || p.Deleted != 0 {
				return apiError(404, "app.user.get_thread_membership_for_user.not_found", "Thread membership not found.")
			}
			f.Viewed = int64(r.query("ts", 0))
			_, lastReply := m.threads(r.me)
			return 200, m.threadJSON(p.ID, r.me, lastReply(p.ID))
		},
		"DELETE /api/v4/users/{uid}/teams/{tid}/threads/{pid}/following": func(r *fakeReq) (int, any) {
			p := m.posts[r.PathValue("pid")]
			if !self(r) || p == nil || !m.canRead(r.me, m.channels[p.Channel]) {
				return forbidden()
			}
			if f := m.follows[p.ID][r.me]; f != nil {
				f.Following = false
			}
			return statusOK()
		},
		"GET /api/v4/users/{uid}/teams/{tid}/drafts": func(r *fakeReq) (int, any) {
			if !self(r) {
				return forbidden()
			}
			d := m.drafts[r.me]
			keys := slices.SortedFunc(maps.Keys(d), func(a, b [2]string) int { return cmp.Compare(d[b].Updated, d[a].Updated) })
			out := []any{}
			for _, k := range keys {
				out = append(out, m.draftJSON(r.me, k, d[k]))
			}
			return 200, out
		},
		// the posts around the first unread (app.GetPostsForChannelAroundLastUnread): none before a first view
		"GET /api/v4/users/{uid}/channels/{cid}/posts/unread": func(r *fakeReq) (int, any) {
			c := channel(r)
			if !self(r) || !m.canRead(r.me, c) {
				return forbidden()
			}
			mem := c.Members[r.me]
			if mem == nil {
				return apiError(404, "app.channel.get_member.missing.app_error", "No channel member found for that user ID and channel ID.")
			}
			ids := m.channelPosts(c, r, false)
			i := slices.IndexFunc(ids, func(id string) bool { return m.posts[id].Created > mem.Viewed })
			if mem.Viewed == 0 || i < 0 {
				return 200, m.postList(nil)
			}
			around := ids[max(0, i-r.query("limit_before", 60)):min(len(ids), i+r.query("limit_after", 60))]
			var thread []string
			for _, p := range m.replies(m.posts[ids[i]]) {
				thread = append(thread, p.ID)
			}
			return 200, m.postList(around, thread...)
		},
		"GET /api/v4/teams": ok([]any{teamJSON()}),
		"GET /api/v4/teams/name/{name}": func(r *fakeReq) (int, any) {
			if r.PathValue("name") != "headroom" {
				return apiError(404, "app.team.get_by_name.missing.app_error", "Unable to find the existing team.")
			}
			return 200, teamJSON()
		},
		// a user joins the team: and its town-square and off-topic (JoinDefaultChannels)
		"POST /api/v4/teams/{tid}/members": func(r *fakeReq) (int, any) {
			if r.PathValue("tid") != fakeTeam || r.field("team_id") != fakeTeam {
				return apiError(404, "app.team.get.find.app_error", "Unable to find the existing team.")
			}
			if r.field("user_id") != r.me {
				return forbidden()
			}
			if !m.team[r.me] {
				m.team[r.me] = true
				m.join(r.me, m.channelNamed("town-square"))
				m.join(r.me, m.channelNamed("off-topic"))
			}
			return 201, teamMemberJSON(r.me)
		},
		"GET /api/v4/teams/{tid}/members/{uid}": func(r *fakeReq) (int, any) {
			if !m.team[r.user()] {
				return apiError(404, "app.team.get_member.missing.app_error", "No team member found for that user ID and team ID.")
			}
			return 200, teamMemberJSON(r.user())
		},
		"GET /api/v4/teams/{tid}/channels": func(r *fakeReq) (int, any) {
			var open []string
			for _, c := range m.channels {
				if c.Type == "O" {
					open = append(open, c.ID)
				}
			}
			slices.Sort(open)
			var cs []*fakeChannel
			per := r.query("per_page", 60)
			for _, id := range open[min(len(open), r.query("page", 0)*per):min(len(open), (r.query("page", 0)+1)*per)] {
				cs = append(cs, m.channels[id])
			}
			return 200, m.channelsJSON(cs)
		},
		"GET /api/v4/teams/{tid}/channels/name/{name}": func(r *fakeReq) (int, any) {
			if c := m.channelNamed(r.PathValue("name")); c != nil && c.Type == "O" {
				return 200, m.channelJSON(c)
			}
			return apiError(404, "app.channel.get_by_name.missing.app_error", "Channel does not exist.")
		},
		"POST /api/v4/teams/{tid}/channels/search": func(r *fakeReq) (int, any) {
			var cs []*fakeChannel
			for _, c := range m.channels {
				if c.Type == "O" && strings.HasPrefix(c.Name, r.field("term")) {
					cs = append(cs, c)
				}
			}
			slices.SortFunc(cs, func(a, b *fakeChannel) int { return strings.Compare(a.Name, b.Name) })
			return 200, m.channelsJSON(cs)
		},
		"POST /api/v4/teams/{tid}/posts/search": func(r *fakeReq) (int, any) {
			terms := r.field("terms")
			var found []string
			for _, c := range m.channelsOf(r.me) {
				for _, id := range m.channelPosts(c, r, false) {
					if slices.Contains(strings.Fields(m.posts[id].Message), terms) {
						found = append(found, id)
					}
				}
			}
			slices.SortFunc(found, func(a, b string) int { return cmp.Compare(m.posts[a].Created, m.posts[b].Created) })
			res := m.postList(found[max(0, len(found)-r.query("per_page", 60)):])
			res["matches"] = nil
			return 200, res
		},
		"POST /api/v4/channels": func(r *fakeReq) (int, any) {
			if r.field("team_id") != fakeTeam || r.field("type") != "O" || r.field("name") == "" {
				return apiError(400, "model.channel.is_valid.type.app_error", "Invalid type.")
			}
			if m.channelNamed(r.field("name")) != nil {
				return apiError(400, "store.sql_channel.save_channel.exists.app_error", "A channel with that name already exists on the same team.")
			}
			c := m.addChannel(r.field("name"), "O")
			m.join(r.me, c) // CreateChannelWithUser
			return 201, m.channelJSON(c)
		},
		// a direct channel: made once for a pair (its name their sorted ids), then found; 201 either way
		"POST /api/v4/channels/direct": func(r *fakeReq) (int, any) {
			ids := r.strings()
			if len(ids) != 2 || m.users[ids[0]] == nil || m.users[ids[1]] == nil {
				return invalid("user_ids")
			}
			if !slices.Contains(ids, r.me) {
				return forbidden()
			}
			slices.Sort(ids)
			name := ids[0] + "__" + ids[1]
			c := m.channelNamed(name)
			if c == nil {
				c = m.addChannel(name, "D")
				c.Members[ids[0]], c.Members[ids[1]] = &fakeMember{}, &fakeMember{}
			}
			return 201, m.channelJSON(c)
		},
		"POST /api/v4/channels/group/search": ok([]any{}), // the users have no group channels
		"GET /api/v4/channels/{cid}": func(r *fakeReq) (int, any) {
			c := channel(r)
			if c == nil {
				return apiError(404, "app.channel.get.existing.app_error", "Unable to find the existing channel.")
			}
			if !m.canRead(r.me, c) {
				return forbidden()
			}
			return 200, m.channelJSON(c)
		},
		"POST /api/v4/channels/{cid}/members": func(r *fakeReq) (int, any) {
			c := channel(r)
			if c == nil {
				return apiError(404, "app.channel.get.existing.app_error", "Unable to find the existing channel.")
			}
			if c.Type != "O" || r.field("user_id") != r.me || !m.team[r.me] {
				return apiError(400, "api.channel.add_user_to_channel.type.app_error", "Can not add user to this channel type.")
			}
			m.join(r.me, c)
			return 201, m.memberJSON(c, r.me)
		},
		"GET /api/v4/channels/{cid}/members/{uid}": func(r *fakeReq) (int, any) {
			c := channel(r)
			if !m.canRead(r.me, c) {
				return forbidden()
			}
			if c.Members[r.user()] == nil {
				return apiError(404, "app.channel.get_member.missing.app_error", "No channel member found for that user ID and channel ID.")
			}
			return 200, m.memberJSON(c, r.user())
		},
		// a channel's posts: since a time (created or edited after it), before a post, or the latest
		"GET /api/v4/channels/{cid}/posts": func(r *fakeReq) (int, any) {
			c := channel(r)
			if !m.canRead(r.me, c) {
				return forbidden()
			}
			q := r.URL.Query()
			ids := m.channelPosts(c, r, q.Has("since"))
			switch {
			case q.Has("since"):
				since := int64(r.query("since", 0))
				ids = slices.DeleteFunc(ids, func(id string) bool { return m.posts[id].Updated <= since })
			case q.Has("before"):
				b := m.posts[q.Get("before")]
				if b == nil {
					return 200, m.postList(nil)
				}
				ids = page(slices.DeleteFunc(ids, func(id string) bool { return m.posts[id].Created >= b.Created }), r)
			default:
				ids = page(ids, r)
			}
			return 200, m.postList(ids)
		},
		"GET /api/v4/channels/{cid}/stats": func(r *fakeReq) (int, any) {
			c := channel(r)
			if !m.canRead(r.me, c) {
				return forbidden()
			}
			files := -1
			if ex, _ := strconv.ParseBool(r.URL.Query().Get("exclude_files_count")); !ex {
				files = 0
				for _, f := range m.files {
					if f.Channel == c.ID && f.Post != "" {
						files++
					}
				}
			}
			return 200, map[string]any{"channel_id": c.ID, "member_count": len(c.Members), "guest_count": 0, "pinnedpost_count": 0, "files_count": files}
		},
		// a view: the channel's, and the previous one's, last view now
		"POST /api/v4/channels/members/{uid}/view": func(r *fakeReq) (int, any) {
			if !self(r) {
				return forbidden()
			}
			times := map[string]any{}
			for _, id := range []string{r.field("channel_id"), r.field("prev_channel_id")} {
				if c := m.channels[id]; c != nil && c.Members[r.me] != nil {
					c.Members[r.me].Viewed = m.now()
					times[id] = c.Members[r.me].Viewed
				}
			}
			return 200, map[string]any{"status": "OK", "last_viewed_at_times": times}
		},
		// a post, a reply when its root is a root post of the channel; the poster's view of the channel now
		"POST /api/v4/posts": func(r *fakeReq) (int, any) {
			c := m.channels[r.field("channel_id")]
			if c == nil || c.Members[r.me] == nil {
				return forbidden()
			}
			root := m.posts[r.field("root_id")]
			if r.field("root_id") != "" && (root == nil || root.Deleted != 0 || root.Root != "" || root.Channel != c.ID) {
				return apiError(400, "api.post.create_post.root_id.app_error", "Invalid RootId parameter.")
			}
			var files []string
			ids, _ := r.body.(map[string]any)["file_ids"].([]any)
			for _, id := range ids {
				if f := m.files[fmt.Sprint(id)]; f != nil && f.User == r.me && f.Post == "" && f.Channel == c.ID {
					files = append(files, f.ID)
				}
			}
			p := m.addPost(&fakePost{User: r.me, Channel: c.ID, Root: r.field("root_id"), Message: r.field("message"), Pending: r.field("pending_post_id"), Files: files})
			c.Members[r.me].Viewed = m.now()
			return 201, m.postJSON(p)
		},
		// a post's thread: its root's, the replies after fromCreateAt (perPage of them), the newest first
		"GET /api/v4/posts/{pid}/thread": func(r *fakeReq) (int, any) {
			p := m.posts[r.PathValue("pid")]
			if p == nil || p.Deleted != 0 {
				return postNotFound()
			}
			if !m.canRead(r.me, m.channels[p.Channel]) {
				return forbidden()
			}
			if p.Root != "" {
				p = m.posts[p.Root]
			}
			ids := []string{p.ID}
			from := int64(r.query("fromCreateAt", 0))
			for _, x := range m.replies(p) {
				if x.Created > from && len(ids) < r.query("perPage", 1000) {
					ids = append(ids, x.ID)
				}
			}
			return 200, m.postList(ids)
		},
		// an edit: of one's own post, not a system message; a post deleted is a permission error, as the server's
		"PUT /api/v4/posts/{pid}/patch": func(r *fakeReq) (int, any) {
			p := m.posts[r.PathValue("pid")]
			if p == nil || p.Deleted != 0 || p.User != r.me {
				return forbidden()
			}
			if p.Type != "" {
				return apiError(400, "api.post.update_post.system_message.app_error", "Unable to update system message.")
			}
			p.Message, p.Edited = r.field("message"), m.now()
			p.Updated = p.Edited
			return 200, m.postJSON(p)
		},
		// a deletion: of one's own post, with its replies; the posts stay, marked (a list since a time shows them)
		"DELETE /api/v4/posts/{pid}": func(r *fakeReq) (int, any) {
			p := m.posts[r.PathValue("pid")]
			if p == nil || p.Deleted != 0 {
				return postNotFound()
			}
			if p.User != r.me {
				return forbidden()
			}
			now := m.now()
			for _, x := range append(m.replies(p), p) {
				x.Deleted, x.Updated = now, now
			}
			return statusOK()
		},
		// unlicensed, as the reference's server and scripts/mattermost.sh's: refused
		"GET /api/v4/posts/scheduled/team/{tid}": func(*fakeReq) (int, any) {
			return apiError(400, "api.scheduled_posts.license_error", "Scheduled posts feature requires a license.")
		},
		// a reaction: a deleted post passes the permission check (its row is there), then is not found
		"POST /api/v4/reactions": func(r *fakeReq) (int, any) {
			p := m.posts[r.field("post_id")]
			if p == nil || r.field("user_id") != r.me || r.field("emoji_name") == "" || !m.canRead(r.me, m.channels[p.Channel]) {
				return forbidden()
			}
			if p.Deleted != 0 {
				return postNotFound()
			}
			now := m.now()
			return 200, map[string]any{"user_id": r.me, "post_id": p.ID, "emoji_name": r.field("emoji_name"), "create_at": now,
				"update_at": now, "delete_at": 0, "remote_id": "", "channel_id": p.Channel}
		},
		"POST /api/v4/drafts": func(r *fakeReq) (int, any) {
			c := m.channels[r.field("channel_id")]
			if c == nil || c.Members[r.me] == nil {
				return forbidden()
			}
			if m.drafts[r.me] == nil {
				m.drafts[r.me] = map[[2]string]*fakeDraft{}
			}
			k := [2]string{c.ID, r.field("root_id")}
			d := m.drafts[r.me][k]
			if d == nil {
				d = &fakeDraft{Created: m.now()}
				m.drafts[r.me][k] = d
			}
			d.Message, d.Updated, d.Files = r.field("message"), m.now(), nil
			ids, _ := r.body.(map[string]any)["file_ids"].([]any)
			for _, id := range ids {
				d.Files = append(d.Files, fmt.Sprint(id))
			}
			return 201, m.draftJSON(r.me, k, d)
		},
		// an upload in the request's body (uploadFileSimple), its channel and name in the query
		"POST /api/v4/files": func(r *fakeReq) (int, any) {
			q := r.URL.Query()
			c := m.channels[q.Get("channel_id")]
			if ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); strings.HasPrefix(ct, "multipart/") || len(r.raw) == 0 || q.Get("filename") == "" {
				return apiError(400, "api.file.upload_file.read_request.app_error", "Unable to upload file(s). Error reading or parsing request data.")
			}
			if c == nil || c.Members[r.me] == nil {
				return forbidden()
			}
			f := &fakeFile{ID: m.id("f"), User: r.me, Channel: c.ID, Name: q.Get("filename"), Size: len(r.raw), Created: m.now()}
			if cfg, _, err := image.DecodeConfig(bytes.NewReader(r.raw)); err == nil {
				f.Image, f.Width, f.Height = true, cfg.Width, cfg.Height
			}
			m.files[f.ID] = f
			return 201, map[string]any{"file_infos": []any{m.fileJSON(f)}, "client_ids": nil}
		},
		"GET /api/v4/files/{fid}/thumbnail": m.fileImage,
		"GET /api/v4/files/{fid}/preview":   m.fileImage,
		"GET /api/v4/config/client": func(r *fakeReq) (int, any) {
			if r.URL.Query().Get("format") != "old" {
				return apiError(501, "api.config.client.old_format.app_error", "New format for the client configuration is not supported yet.")
			}
			return 200, map[string]string{"Version": "11.4.0", "BuildNumber": "11.4.0", "SiteName": "Mattermost", "CollapsedThreads": "default_on",
				"AllowSyncedDrafts": "true", "EnableClientMetrics": "true", "FeatureFlagChannelBookmarks": "false"}
		},
		"POST /api/v4/roles/names": func(r *fakeReq) (int, any) {
			out := []any{}
			for _, name := range r.strings() {
				out = append(out, map[string]any{"id": m.id("r"), "name": name, "display_name": name, "description": "", "create_at": 0,
					"update_at": 0, "delete_at": 0, "permissions": []string{"create_post", "read_channel"}, "scheme_managed": true, "built_in": true})
			}
			return 200, out
		},
		"GET /api/v4/plugins/webapp": ok([]any{}),
		// the client's performance report (model.PerformanceReport.IsValid): version 0.1, start before end, ended in the last 5 minutes
		"POST /api/v4/client_perf": func(r *fakeReq) (int, any) {
			b, _ := r.body.(map[string]any)
			start, _ := b["start"].(float64)
			end, _ := b["end"].(float64)
			if v, _ := b["version"].(string); !strings.HasPrefix(v, "0.1.") || start > end || end < float64(m.now()-5*60*1000) {
				return invalid("report")
			}
			return statusOK()
		},
	}
}

// fileImage is a file's thumbnail or preview: a JPEG, for an image.
func (m *fakeMattermost) fileImage(r *fakeReq) (int, any) {
	f := m.files[r.PathValue("fid")]
	if f == nil {
		return apiError(404, "app.file_info.get.app_error", "Unable to get the file info.")
	}
	if !m.canRead(r.me, m.channels[f.Channel]) {
		return forbidden()
	}
	if !f.Image {
		return apiError(400, "api.file.get_file_thumbnail.no_thumbnail.app_error", "File doesn't have a thumbnail.")
	}
	return 200, fakeBytes{header: map[string]string{"Content-Type": "image/jpeg", "Cache-Control": "max-age=2592000, private"}, body: m.thumb}
}

func compare2(a, b [2]string) int {
	if c := strings.Compare(a[0], b[0]); c != 0 {
		return c
	}
	return strings.Compare(a[1], b[1])
}

// websocket holds a user's WebSocket: authenticated by its header, as the
// example connects, greeted with "hello", sent the events of its
// channels. Of the actions a client sends (seq 1 and up), "presence" is
// answered OK and "user_typing" too, with a "typing" event to the
// channel's other members; any other is recorded as wrong.
func (m *fakeMattermost) websocket(w http.ResponseWriter, r *http.Request) {
	m.mu.Lock()
	me := m.tokens[strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")]
	m.mu.Unlock()
	if me == "" {
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	ws, err := (&websocket.Upgrader{}).Upgrade(w, r, nil)
	if err != nil {
		return
	}
	c := &fakeConn{ws: ws}
	m.mu.Lock()
	m.hits["GET /api/v4/websocket"]++
	m.conns[me] = append(m.conns[me], c)
	ws.WriteJSON(map[string]any{"event": "hello", "data": map[string]any{"connection_id": me, "server_version": "11.4.0"},
		"broadcast": map[string]any{"omit_users": nil, "user_id": me, "channel_id": "", "team_id": ""}, "seq": 0})
	m.mu.Unlock()
	for {
		var msg struct {
			Seq    int64          `json:"seq"`
			Action string         `json:"action"`
			Data   map[string]any `json:"data"`
		}
		if ws.ReadJSON(&msg) != nil {
			break
		}
		m.mu.Lock()
		m.hits["WS "+msg.Action]++
		ch, _ := msg.Data["channel_id"].(string)
		switch {
		case msg.Seq <= 0:
			m.wrong = append(m.wrong, fmt.Sprintf("WebSocket action %q with seq %d", msg.Action, msg.Seq))
		case msg.Action == "presence":
			ws.WriteJSON(map[string]any{"status": "OK", "seq_reply": msg.Seq})
		case msg.Action == "user_typing" && m.channels[ch] != nil && m.channels[ch].Members[me] != nil:
			ws.WriteJSON(map[string]any{"status": "OK", "seq_reply": msg.Seq})
			parent, _ := msg.Data["parent_id"].(string)
			m.broadcast(m.channels[ch], me, "typing", map[string]any{"parent_id": parent, "user_id": me})
		default:
			m.wrong = append(m.wrong, fmt.Sprintf("WebSocket action %q: %v", msg.Action, msg.Data))
		}
		m.mu.Unlock()
	}
	m.mu.Lock()
	m.conns[me] = slices.DeleteFunc(m.conns[me], func(x *fakeConn) bool { return x == c })
	m.mu.Unlock()
}
