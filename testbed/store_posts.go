package testbed

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"
)

type post struct {
	ID        string       `json:"id"`
	CreateAt  int64        `json:"create_at"` // ms since the epoch
	UpdateAt  int64        `json:"update_at"` // ms since the epoch
	UserID    string       `json:"user_id"`
	ChannelID string       `json:"channel_id"`
	RootID    string       `json:"root_id"`
	Message   string       `json:"message"`
	Metadata  postMetadata `json:"metadata"`
}

type postMetadata struct {
	Reactions []reaction `json:"reactions,omitempty"` // oldest first, at most maxReactionsPerPost
}

type reaction struct {
	UserID    string `json:"user_id"`
	PostID    string `json:"post_id"`
	EmojiName string `json:"emoji_name"`
	CreateAt  int64  `json:"create_at"` // ms since the epoch
}

// thread is a root post with at least one reply.
type thread struct {
	root         *post
	replies      []*post          // oldest first
	participants map[string]int64 // user id -> when they last read the thread, ms since the epoch
}

// postList is the {"order","posts"} shape of the post-listing routes.
type postList struct {
	Order []string        `json:"order"`
	Posts map[string]post `json:"posts"`
}

func newPostList(ps []*post) postList {
	l := postList{Order: make([]string, 0, len(ps)), Posts: make(map[string]post, len(ps))}
	for _, p := range ps {
		l.Order = append(l.Order, p.ID)
		l.Posts[p.ID] = p.clone()
	}
	return l
}

func (p *post) clone() post {
	c := *p
	c.Metadata.Reactions = slices.Clone(p.Metadata.Reactions)
	return c
}

func validMessage(msg string) error {
	if msg == "" || utf8.RuneCountInString(msg) > maxMessageRunes {
		return fmt.Errorf("message: 1 to %d characters: %w", maxMessageRunes, errInvalid)
	}
	return nil
}

// insertPost appends p to its channel, indexes it, keeps its thread and drops the channel's oldest
// post beyond maxPostsPerChannel. Callers hold mu and have checked p.RootID.
func (st *store) insertPost(ch *channel, p *post) {
	ch.posts = append(ch.posts, p)
	ch.msgCount++
	st.posts[p.ID] = p
	if p.RootID != "" {
		t := st.threads[p.RootID]
		if t == nil {
			root := st.posts[p.RootID]
			t = &thread{root: root, participants: map[string]int64{}}
			st.threads[root.ID] = t
			st.follow(root.UserID, t, root.CreateAt)
		}
		t.replies = append(t.replies, p)
		st.follow(p.UserID, t, p.CreateAt)
	}
	if len(ch.posts) > maxPostsPerChannel {
		oldest := ch.posts[0]
		ch.posts[0] = nil
		ch.posts = ch.posts[1:]
		st.forget(oldest)
	}
}

// follow makes userID a participant of t that has read it up to viewedAt. Callers hold mu.
func (st *store) follow(userID string, t *thread, viewedAt int64) {
	t.participants[userID] = max(t.participants[userID], viewedAt)
	ut := st.userThreads[userID]
	if ut == nil {
		ut = map[string]bool{}
		st.userThreads[userID] = ut
	}
	ut[t.root.ID] = true
}

// forget removes p from the indexes and from its thread; a root takes its thread with it (the replies
// stay in their channel). It does not touch the channel's post list. Callers hold mu.
func (st *store) forget(p *post) {
	delete(st.posts, p.ID)
	if t := st.threads[p.RootID]; p.RootID != "" && t != nil {
		t.replies = slices.DeleteFunc(t.replies, func(r *post) bool { return r == p })
		if len(t.replies) > 0 {
			return
		}
		p = t.root
	}
	if t := st.threads[p.ID]; t != nil {
		for u := range t.participants {
			delete(st.userThreads[u], p.ID)
		}
		delete(st.threads, p.ID)
	}
}

// createPost stores a post by userID, who must be a member of the channel. rootID, if not empty, must be
// a root post of the same channel.
func (st *store) createPost(userID, channelID, rootID, message string) (post, error) {
	if err := validMessage(message); err != nil {
		return post{}, err
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	ch, _, err := st.memberOf(userID, channelID)
	if err != nil {
		return post{}, err
	}
	if rootID != "" {
		root := st.posts[rootID]
		if root == nil || root.ChannelID != channelID || root.RootID != "" {
			return post{}, fmt.Errorf("root_id %s: not a root post of channel %s: %w", rootID, channelID, errInvalid)
		}
	}
	now := st.now().UnixMilli()
	p := &post{ID: st.newID(), CreateAt: now, UpdateAt: now, UserID: userID, ChannelID: channelID,
		RootID: rootID, Message: message}
	st.insertPost(ch, p)
	return p.clone(), nil
}

// ownPost returns the post if userID wrote it. Callers hold mu.
// postChannel returns the channel id of post id, or "" when there is no such post.
func (st *store) postChannel(id string) string {
	st.mu.RLock()
	defer st.mu.RUnlock()
	if p := st.posts[id]; p != nil {
		return p.ChannelID
	}
	return ""
}

func (st *store) ownPost(userID, postID string) (*post, error) {
	p := st.posts[postID]
	if p == nil {
		return nil, fmt.Errorf("post %s: %w", postID, errNotFound)
	}
	if p.UserID != userID {
		return nil, fmt.Errorf("post %s: not the author: %w", postID, errForbidden)
	}
	return p, nil
}

// patchPost replaces the message of a post userID wrote.
func (st *store) patchPost(userID, postID, message string) (post, error) {
	if err := validMessage(message); err != nil {
		return post{}, err
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	p, err := st.ownPost(userID, postID)
	if err != nil {
		return post{}, err
	}
	p.Message = message
	p.UpdateAt = st.now().UnixMilli()
	return p.clone(), nil
}

// deletePost removes a post userID wrote; a root post takes its replies with it.
func (st *store) deletePost(userID, postID string) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	p, err := st.ownPost(userID, postID)
	if err != nil {
		return err
	}
	gone := map[*post]bool{p: true}
	if t := st.threads[p.ID]; t != nil {
		for _, r := range t.replies {
			gone[r] = true
		}
	}
	for q := range gone {
		if q != p {
			delete(st.posts, q.ID)
		}
	}
	st.forget(p)
	ch := st.byID[p.ChannelID]
	ch.posts = slices.DeleteFunc(ch.posts, func(q *post) bool { return gone[q] })
	return nil
}

// channelPosts returns page (from 0) of the channel's posts, perPage of them, newest first.
func (st *store) channelPosts(userID, channelID string, page, perPage int) (postList, error) {
	st.mu.RLock()
	defer st.mu.RUnlock()
	ch, err := st.readable(userID, channelID)
	if err != nil {
		return postList{}, err
	}
	var ps []*post
	for i := len(ch.posts) - 1 - page*perPage; i >= 0 && len(ps) < perPage; i-- {
		ps = append(ps, ch.posts[i])
	}
	return newPostList(ps), nil
}

// postThread returns the thread the post belongs to: its root first, then the replies oldest first.
func (st *store) postThread(userID, postID string) (postList, error) {
	st.mu.RLock()
	defer st.mu.RUnlock()
	p := st.posts[postID]
	if p == nil {
		return postList{}, fmt.Errorf("post %s: %w", postID, errNotFound)
	}
	if _, err := st.readable(userID, p.ChannelID); err != nil {
		return postList{}, err
	}
	rootID := cmp.Or(p.RootID, p.ID)
	root := st.posts[rootID]
	if root == nil {
		return postList{}, fmt.Errorf("root post %s: %w", rootID, errNotFound)
	}
	ps := []*post{root}
	if t := st.threads[rootID]; t != nil {
		ps = append(ps, t.replies...)
	}
	return newPostList(ps), nil
}

// saveReaction adds userID's emoji to a post it can read; saving the same reaction twice is not an error.
func (st *store) saveReaction(userID, postID, emoji string) (reaction, error) {
	if emoji == "" || len(emoji) > maxEmojiNameLen {
		return reaction{}, fmt.Errorf("emoji_name: 1 to %d bytes: %w", maxEmojiNameLen, errInvalid)
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	p := st.posts[postID]
	if p == nil {
		return reaction{}, fmt.Errorf("post %s: %w", postID, errNotFound)
	}
	if _, err := st.readable(userID, p.ChannelID); err != nil {
		return reaction{}, err
	}
	rs := p.Metadata.Reactions
	for _, r := range rs {
		if r.UserID == userID && r.EmojiName == emoji {
			return r, nil
		}
	}
	r := reaction{UserID: userID, PostID: postID, EmojiName: emoji, CreateAt: st.now().UnixMilli()}
	rs = append(rs, r)
	if len(rs) > maxReactionsPerPost {
		rs = slices.Delete(rs, 0, 1)
	}
	p.Metadata.Reactions = rs
	return r, nil
}

// threadInfo is one entry of GetThreads.
type threadInfo struct {
	ID            string   `json:"id"`
	ReplyCount    int      `json:"reply_count"`
	LastReplyAt   int64    `json:"last_reply_at"`  // ms since the epoch
	LastViewedAt  int64    `json:"last_viewed_at"` // ms since the epoch
	UnreadReplies int      `json:"unread_replies"`
	Participants  []string `json:"participants"` // user ids, sorted
	Post          post     `json:"post"`
}

// userThreadList returns page (from 0) of the threads userID takes part in, perPage of them, the most
// recently replied first.
func (st *store) userThreadList(userID string, page, perPage int) []threadInfo {
	st.mu.RLock()
	defer st.mu.RUnlock()
	ts := make([]*thread, 0, len(st.userThreads[userID]))
	for id := range st.userThreads[userID] {
		ts = append(ts, st.threads[id])
	}
	lastReply := func(t *thread) int64 { return t.replies[len(t.replies)-1].CreateAt }
	slices.SortFunc(ts, func(a, b *thread) int {
		return cmp.Or(cmp.Compare(lastReply(b), lastReply(a)), strings.Compare(a.root.ID, b.root.ID))
	})
	out := []threadInfo{}
	for i := page * perPage; i < len(ts) && len(out) < perPage; i++ {
		t := ts[i]
		seen := t.participants[userID]
		ti := threadInfo{ID: t.root.ID, ReplyCount: len(t.replies), LastReplyAt: lastReply(t),
			LastViewedAt: seen, Post: t.root.clone()}
		for _, r := range t.replies {
			if r.CreateAt > seen {
				ti.UnreadReplies++
			}
		}
		for u := range t.participants {
			ti.Participants = append(ti.Participants, u)
		}
		slices.Sort(ti.Participants)
		out = append(out, ti)
	}
	return out
}

// markThreadRead records that userID has read the thread up to now, if they take part in it.
// The thread must exist.
func (st *store) markThreadRead(userID, rootID string) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	t := st.threads[rootID]
	if t == nil {
		return fmt.Errorf("thread %s: %w", rootID, errNotFound)
	}
	if _, ok := t.participants[userID]; ok {
		t.participants[userID] = st.now().UnixMilli()
	}
	return nil
}

// searchPosts returns up to maxSearchResults posts, newest first, that contain terms (case-insensitive)
// in the channels userID is a member of. It looks at no more than maxSearchScanned posts, the newest
// of each channel first.
func (st *store) searchPosts(userID, terms string) (postList, error) {
	terms = strings.ToLower(strings.TrimSpace(terms))
	if terms == "" {
		return postList{}, fmt.Errorf("terms: empty: %w", errInvalid)
	}
	st.mu.RLock()
	defer st.mu.RUnlock()
	var hits []*post
	budget := maxSearchScanned
	for id := range st.members[userID] {
		ps := st.byID[id].posts
		found := 0
		for i := len(ps) - 1; i >= 0 && budget > 0 && found < maxSearchResults; i-- {
			budget--
			if strings.Contains(strings.ToLower(ps[i].Message), terms) {
				hits = append(hits, ps[i])
				found++
			}
		}
	}
	slices.SortFunc(hits, func(a, b *post) int {
		return cmp.Or(cmp.Compare(b.CreateAt, a.CreateAt), strings.Compare(a.ID, b.ID))
	})
	return newPostList(hits[:min(len(hits), maxSearchResults)]), nil
}
