package testbed

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
)

// Paging of the listing routes (?page=N&per_page=M).
const (
	defaultPerPage = 30
	maxPerPage     = 200
	maxPage        = 1 << 20
)

// decode reads the call's JSON body into v.
func decode(c *call, v any) error {
	if err := json.Unmarshal(c.body, v); err != nil {
		return fmt.Errorf("invalid JSON body: %v: %w", err, errInvalid)
	}
	return nil
}

// fail turns a store or decoding error into a JSON error reply with the matching status code.
func fail(err error) reply {
	code := http.StatusInternalServerError
	switch {
	case errors.Is(err, errInvalid):
		code = http.StatusBadRequest
	case errors.Is(err, errAuth):
		code = http.StatusUnauthorized
	case errors.Is(err, errForbidden):
		code = http.StatusForbidden
	case errors.Is(err, errNotFound):
		code = http.StatusNotFound
	case errors.Is(err, errConflict):
		code = http.StatusConflict
	}
	return errorReply(code, err.Error())
}

// jsonString is v as a JSON string, as the reference server puts posts and reactions into events.
func jsonString(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func ok(code int, body any) reply { return reply{status: code, body: body} }

// paging reads ?page (from 0, default 0) and ?per_page (default 30, at most 200).
func paging(c *call) (page, perPage int, err error) {
	q := c.r.URL.Query()
	page, perPage = 0, defaultPerPage
	if v := q.Get("page"); v != "" {
		if page, err = strconv.Atoi(v); err != nil || page < 0 || page > maxPage {
			return 0, 0, fmt.Errorf("page %q: an integer from 0 to %d: %w", v, maxPage, errInvalid)
		}
	}
	if v := q.Get("per_page"); v != "" {
		if perPage, err = strconv.Atoi(v); err != nil || perPage < 1 {
			return 0, 0, fmt.Errorf("per_page %q: a positive integer: %w", v, errInvalid)
		}
		perPage = min(perPage, maxPerPage)
	}
	return page, perPage, nil
}

func required(field, value string) error {
	if value == "" {
		return fmt.Errorf("%s: required: %w", field, errInvalid)
	}
	return nil
}

func (s *Server) createUser(c *call) reply {
	var in struct{ Username, Password string }
	if err := decode(c, &in); err != nil {
		return fail(err)
	}
	u, err := s.store.createUser(in.Username, in.Password)
	if err != nil {
		return fail(err)
	}
	return ok(http.StatusCreated, u)
}

func (s *Server) login(c *call) reply {
	var in struct {
		LoginID  string `json:"login_id"`
		Password string `json:"password"`
	}
	if err := decode(c, &in); err != nil {
		return fail(err)
	}
	u, tok, err := s.store.login(in.LoginID, in.Password)
	if err != nil {
		return fail(err)
	}
	rep := ok(http.StatusOK, u)
	rep.header = http.Header{"Token": {tok}}
	rep.cookies = []*http.Cookie{
		{Name: "MMAUTHTOKEN", Value: tok, Path: "/", HttpOnly: true, SameSite: http.SameSiteLaxMode},
		{Name: "MMUSERID", Value: u.ID, Path: "/", SameSite: http.SameSiteLaxMode},
	}
	return rep
}

func (s *Server) getMe(c *call) reply {
	u, err := s.store.getUser(c.userID)
	if err != nil {
		return fail(err)
	}
	return ok(http.StatusOK, u)
}

func (s *Server) getMyChannels(c *call) reply {
	return ok(http.StatusOK, s.store.myChannels(c.userID))
}

func (s *Server) getChannelPosts(c *call) reply {
	page, perPage, err := paging(c)
	if err != nil {
		return fail(err)
	}
	l, err := s.store.channelPosts(c.userID, c.r.PathValue("id"), page, perPage)
	if err != nil {
		return fail(err)
	}
	return ok(http.StatusOK, l)
}

func (s *Server) viewChannel(c *call) reply {
	var in struct {
		ChannelID string `json:"channel_id"`
	}
	if err := decode(c, &in); err != nil {
		return fail(err)
	}
	if err := required("channel_id", in.ChannelID); err != nil {
		return fail(err)
	}
	if err := s.store.viewChannel(c.userID, in.ChannelID); err != nil {
		return fail(err)
	}
	s.toUser(c, c.userID, event{Event: "channel_viewed", Data: map[string]any{"channel_id": in.ChannelID}, Broadcast: map[string]any{"user_id": c.userID}})
	return ok(http.StatusOK, status("OK"))
}

func (s *Server) getChannelUnread(c *call) reply {
	id := c.r.PathValue("id")
	n, err := s.store.unread(c.userID, id)
	if err != nil {
		return fail(err)
	}
	return ok(http.StatusOK, map[string]any{"channel_id": id, "msg_count": n})
}

func (s *Server) createPost(c *call) reply {
	var in struct {
		ChannelID string `json:"channel_id"`
		Message   string `json:"message"`
		RootID    string `json:"root_id"`
	}
	if err := decode(c, &in); err != nil {
		return fail(err)
	}
	if err := required("channel_id", in.ChannelID); err != nil {
		return fail(err)
	}
	p, err := s.store.createPost(c.userID, in.ChannelID, in.RootID, in.Message)
	if err != nil {
		return fail(err)
	}
	s.broadcast(c, p.ChannelID, "", event{Event: "posted", Data: map[string]any{"channel_id": p.ChannelID, "post": jsonString(p)}})
	return ok(http.StatusCreated, p)
}

func (s *Server) patchPost(c *call) reply {
	var in struct {
		Message *string `json:"message"`
	}
	if err := decode(c, &in); err != nil {
		return fail(err)
	}
	if in.Message == nil {
		return fail(required("message", ""))
	}
	p, err := s.store.patchPost(c.userID, c.r.PathValue("id"), *in.Message)
	if err != nil {
		return fail(err)
	}
	return ok(http.StatusOK, p)
}

func (s *Server) deletePost(c *call) reply {
	if err := s.store.deletePost(c.userID, c.r.PathValue("id")); err != nil {
		return fail(err)
	}
	return ok(http.StatusOK, status("OK"))
}

func (s *Server) getPostThread(c *call) reply {
	l, err := s.store.postThread(c.userID, c.r.PathValue("id"))
	if err != nil {
		return fail(err)
	}
	return ok(http.StatusOK, l)
}

func (s *Server) saveReaction(c *call) reply {
	var in struct {
		UserID    string `json:"user_id"`
		PostID    string `json:"post_id"`
		EmojiName string `json:"emoji_name"`
	}
	if err := decode(c, &in); err != nil {
		return fail(err)
	}
	if in.UserID != "" && in.UserID != c.userID {
		return fail(fmt.Errorf("reaction for another user: %w", errForbidden))
	}
	if err := required("post_id", in.PostID); err != nil {
		return fail(err)
	}
	r, err := s.store.saveReaction(c.userID, in.PostID, in.EmojiName)
	if err != nil {
		return fail(err)
	}
	if ch := s.store.postChannel(in.PostID); ch != "" {
		s.broadcast(c, ch, "", event{Event: "reaction_added", Data: map[string]any{"reaction": jsonString(r)}})
	}
	return ok(http.StatusCreated, r)
}

func (s *Server) getThreads(c *call) reply {
	page, perPage, err := paging(c)
	if err != nil {
		return fail(err)
	}
	return ok(http.StatusOK, map[string]any{"threads": s.store.userThreadList(c.userID, page, perPage)})
}

func (s *Server) updateThreadRead(c *call) reply {
	if err := s.store.markThreadRead(c.userID, c.r.PathValue("post_id")); err != nil {
		return fail(err)
	}
	return ok(http.StatusOK, status("OK"))
}

func (s *Server) searchUsers(c *call) reply {
	var in struct{ Term string }
	if err := decode(c, &in); err != nil {
		return fail(err)
	}
	return ok(http.StatusOK, s.store.searchUsers(in.Term))
}

func (s *Server) searchPosts(c *call) reply {
	var in struct{ Terms string }
	if err := decode(c, &in); err != nil {
		return fail(err)
	}
	l, err := s.store.searchPosts(c.userID, in.Terms)
	if err != nil {
		return fail(err)
	}
	return ok(http.StatusOK, l)
}

func (s *Server) createDirectChannel(c *call) reply {
	var ids []string
	if err := decode(c, &ids); err != nil {
		return fail(err)
	}
	if len(ids) != 2 || ids[0] == "" || ids[1] == "" {
		return fail(fmt.Errorf("body: an array of two user ids: %w", errInvalid))
	}
	ch, created, err := s.store.directChannel(c.userID, ids[0], ids[1])
	if err != nil {
		return fail(err)
	}
	if created {
		return ok(http.StatusCreated, ch)
	}
	return ok(http.StatusOK, ch)
}

func (s *Server) joinChannel(c *call) reply {
	var in struct {
		UserID string `json:"user_id"`
	}
	if len(c.body) > 0 {
		if err := decode(c, &in); err != nil {
			return fail(err)
		}
	}
	if in.UserID != "" && in.UserID != c.userID {
		return fail(fmt.Errorf("adding another user: %w", errForbidden))
	}
	id := c.r.PathValue("id")
	if err := s.store.joinChannel(c.userID, id); err != nil {
		return fail(err)
	}
	return ok(http.StatusCreated, map[string]string{"channel_id": id, "user_id": c.userID})
}
