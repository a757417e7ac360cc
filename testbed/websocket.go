package testbed

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
)

// The WebSocket endpoint, GET /api/v4/websocket, speaks the reference server's protocol (Mattermost's):
//
//   - authentication: a session token at the upgrade (Authorization: Bearer, or the MMAUTHTOKEN cookie), or
//     else the first message, {"seq": 1, "action": "authentication_challenge", "data": {"token": "..."}},
//     within wsAuthTimeout, answered {"status": "OK", "seq_reply": 1};
//   - then the event hello, and events for the user's channels as they happen: posted (a post created),
//     reaction_added, typing (another member's user_typing action) and channel_viewed (to the viewer's own
//     connections). Each event carries seq, counting from 0 per connection;
//   - client actions {"seq": n, "action": ..., "data": {...}}: user_typing {"channel_id"} and ping, each
//     answered {"status": "OK", "seq_reply": n}; an unknown action gets status FAIL.
//
// Events to a connection wait in a bounded queue (wsQueue); one that finds it full is dropped and counted
// (testbed_websocket_events_dropped_total). Delivering events and keeping connections open take worker
// time (Config.EventCost, Config.ConnCost), so connected users change the capacity (docs/TESTBED.md).
const (
	wsAuthTimeout = 5 * time.Second
	wsQueue       = 256
	wsReadLimit   = 64 << 10
	wsWriteWait   = 10 * time.Second
	wsPongWait    = 60 * time.Second
	wsPingEvery   = wsPongWait * 9 / 10
)

var upgrader = websocket.Upgrader{ReadBufferSize: 1024, WriteBufferSize: 1024}

// event is one server-to-client message.
type event struct {
	Event     string         `json:"event"`
	Data      map[string]any `json:"data"`
	Broadcast map[string]any `json:"broadcast"`
	Seq       int64          `json:"seq"`
}

// wsReply answers a client action.
type wsReply struct {
	Status   string         `json:"status"`
	SeqReply int64          `json:"seq_reply"`
	Data     map[string]any `json:"data,omitempty"`
	Error    map[string]any `json:"error,omitempty"`
}

// wsAction is a client-to-server message.
type wsAction struct {
	Seq    int64           `json:"seq"`
	Action string          `json:"action"`
	Data   json.RawMessage `json:"data"`
}

// hub holds the open connections by user id.
type hub struct {
	mu    sync.RWMutex
	conns map[string]map[*wsConn]bool
	open  atomic.Int64
	quit  chan struct{} // closed when the last connection goes: connWork ends
}

func newHub() *hub { return &hub{conns: map[string]map[*wsConn]bool{}} }

// wsConn is one open connection: its writer goroutine sends what out holds, in order, with seq set.
type wsConn struct {
	userID string
	ws     *websocket.Conn
	out    chan any
	done   chan struct{} // closed when the reader ends
	dead   chan struct{} // closed when the writer ends
	seq    int64         // the writer's alone
}

// add registers c; for the first connection open it returns a channel closed when the last one goes,
// else nil.
func (h *hub) add(c *wsConn) (quit chan struct{}) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.conns[c.userID] == nil {
		h.conns[c.userID] = map[*wsConn]bool{}
	}
	h.conns[c.userID][c] = true
	if h.open.Add(1) == 1 {
		h.quit = make(chan struct{})
		return h.quit
	}
	return nil
}

func (h *hub) remove(c *wsConn) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.conns[c.userID], c)
	if len(h.conns[c.userID]) == 0 {
		delete(h.conns, c.userID)
	}
	if h.open.Add(-1) == 0 {
		close(h.quit)
	}
}

// DropWebSockets breaks every open WebSocket connection without a closing frame, as a restart or a
// network fault would, and returns how many it broke. Clients see an abnormal close (1006).
func (s *Server) DropWebSockets() int {
	s.hub.mu.RLock()
	defer s.hub.mu.RUnlock()
	n := 0
	for _, cs := range s.hub.conns {
		for c := range cs {
			c.ws.NetConn().Close()
			n++
		}
	}
	return n
}

// send queues ev for every connection of users (but not of except, "" for none), dropping it for a
// connection whose queue is full; it returns how many were queued and dropped.
func (h *hub) send(users []string, except string, ev event) (queued, dropped int) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	for _, u := range users {
		if u == except {
			continue
		}
		for c := range h.conns[u] {
			select {
			case c.out <- ev:
				queued++
			default:
				dropped++
			}
		}
	}
	return queued, dropped
}

// broadcast sends ev to the members of channelID (but not except), counting it. The events are c's
// work (it holds its worker eventCost longer per connection reached); with c nil, a worker of their
// own does it.
func (s *Server) broadcast(c *call, channelID, except string, ev event) {
	if s.hub.open.Load() == 0 {
		return
	}
	if ev.Broadcast == nil {
		ev.Broadcast = map[string]any{"channel_id": channelID}
	}
	s.sent(c, ev.Event)(s.hub.send(s.store.channelMembers(channelID), except, ev))
}

// toUser sends ev to userID's own connections, as c's work.
func (s *Server) toUser(c *call, userID string, ev event) {
	if s.hub.open.Load() == 0 {
		return
	}
	s.sent(c, ev.Event)(s.hub.send([]string{userID}, "", ev))
}

// sent counts events queued and dropped, and charges their cost: to c, or to a worker of their own.
func (s *Server) sent(c *call, name string) func(queued, dropped int) {
	return func(queued, dropped int) {
		s.metrics.wsEvents.WithLabelValues(name).Add(float64(queued))
		s.metrics.wsDropped.Add(float64(dropped))
		if c != nil {
			c.events += queued
		} else {
			s.work(time.Duration(queued) * s.eventCost)
		}
	}
}

// work holds a worker for d, waiting for one as requests do (a full queue or d of 0: nothing).
func (s *Server) work(d time.Duration) {
	if d <= 0 {
		return
	}
	start, err := s.pool.acquire(context.Background())
	if err != nil {
		return // overloaded: the work is shed, as a request would be
	}
	due := start.Add(d)
	time.Sleep(due.Sub(s.now()))
	s.pool.release(due)
}

// connWork charges the open connections' upkeep, once a second, until quit is closed.
func (s *Server) connWork(quit <-chan struct{}) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
			s.work(time.Duration(s.hub.open.Load()) * s.connCost)
		case <-quit:
			return
		}
	}
}

// websocket serves GET /api/v4/websocket.
func (s *Server) websocket(w http.ResponseWriter, r *http.Request) {
	userID := s.store.session(token(r))
	ws, err := upgrader.Upgrade(w, r, nil)
	if err != nil {
		return // the upgrader has answered
	}
	defer ws.Close()
	ws.SetReadLimit(wsReadLimit)
	if userID == "" {
		if userID = s.challenge(ws); userID == "" {
			return
		}
	}
	c := &wsConn{userID: userID, ws: ws, out: make(chan any, wsQueue), done: make(chan struct{}), dead: make(chan struct{})}
	c.out <- event{Event: "hello", Data: map[string]any{"server_version": "headroom-testbed", "connection_id": strconv.FormatInt(time.Now().UnixNano(), 36)},
		Broadcast: map[string]any{"user_id": userID}}
	// On the way out: remove c from the hub, then let the writer send the closing frame and end, then
	// close the socket. A client that sees the closing frame thus sees the connection gone. gorilla's
	// default answer to a client's close frame would come before all that: the writer answers instead.
	ws.SetCloseHandler(func(int, string) error { return nil })
	defer func() { <-c.dead }()
	defer close(c.done)
	if quit := s.hub.add(c); quit != nil && s.connCost > 0 {
		go s.connWork(quit)
	}
	defer s.hub.remove(c)
	go c.write(ws)

	ws.SetReadDeadline(time.Now().Add(wsPongWait))
	ws.SetPongHandler(func(string) error { return ws.SetReadDeadline(time.Now().Add(wsPongWait)) })
	for {
		var a wsAction
		if err := ws.ReadJSON(&a); err != nil {
			code := "none"
			if ce, ok := err.(*websocket.CloseError); ok {
				code = strconv.Itoa(ce.Code)
			}
			s.metrics.wsCloses.WithLabelValues(code).Inc()
			return // closed, broken or not JSON: the connection ends
		}
		select {
		case c.out <- s.act(userID, a):
		case <-c.dead:
			return
		}
	}
}

// challenge reads the authentication_challenge that must come first when the upgrade carried no session,
// answers it, and returns the user id ("" after answering a failure).
func (s *Server) challenge(ws *websocket.Conn) string {
	ws.SetReadDeadline(time.Now().Add(wsAuthTimeout))
	var a wsAction
	if err := ws.ReadJSON(&a); err != nil {
		return ""
	}
	var in struct {
		Token string `json:"token"`
	}
	_ = json.Unmarshal(a.Data, &in)
	userID := ""
	if a.Action == "authentication_challenge" {
		userID = s.store.session(in.Token)
	}
	ws.SetWriteDeadline(time.Now().Add(wsWriteWait))
	if userID == "" {
		ws.WriteJSON(wsReply{Status: "FAIL", SeqReply: a.Seq, Error: map[string]any{"id": "api.web_socket_router.not_authenticated.app_error", "status_code": 401}})
		ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.ClosePolicyViolation, "not authenticated"), time.Now().Add(time.Second))
		return ""
	}
	if err := ws.WriteJSON(wsReply{Status: "OK", SeqReply: a.Seq}); err != nil {
		return ""
	}
	return userID
}

// act answers one client action.
func (s *Server) act(userID string, a wsAction) wsReply {
	switch a.Action {
	case "ping":
		return wsReply{Status: "OK", SeqReply: a.Seq, Data: map[string]any{"text": "pong"}}
	case "user_typing":
		var in struct {
			ChannelID string `json:"channel_id"`
			ParentID  string `json:"parent_id"`
		}
		_ = json.Unmarshal(a.Data, &in)
		if err := s.store.mayRead(userID, in.ChannelID); err != nil {
			return wsReply{Status: "FAIL", SeqReply: a.Seq, Error: map[string]any{"message": err.Error()}}
		}
		s.broadcast(nil, in.ChannelID, userID, event{Event: "typing", Data: map[string]any{"user_id": userID, "parent_id": in.ParentID}})
		return wsReply{Status: "OK", SeqReply: a.Seq}
	}
	return wsReply{Status: "FAIL", SeqReply: a.Seq, Error: map[string]any{"message": "unknown action " + strconv.Quote(a.Action)}}
}

// write sends the connection's queue in order, numbering events, and pings; it closes ws on a write
// error so that the reader ends too.
func (c *wsConn) write(ws *websocket.Conn) {
	defer close(c.dead)
	ping := time.NewTicker(wsPingEvery)
	defer ping.Stop()
	for {
		select {
		case m := <-c.out:
			if ev, ok := m.(event); ok {
				ev.Seq = c.seq
				c.seq++
				m = ev
			}
			ws.SetWriteDeadline(time.Now().Add(wsWriteWait))
			if err := ws.WriteJSON(m); err != nil {
				ws.Close()
				return
			}
		case <-ping.C:
			if err := ws.WriteControl(websocket.PingMessage, nil, time.Now().Add(wsWriteWait)); err != nil {
				ws.Close()
				return
			}
		case <-c.done:
			ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
			return
		}
	}
}
