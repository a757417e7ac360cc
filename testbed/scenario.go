package testbed

import (
	"fmt"
	"time"
)

// PostsScenario is the smallest scenario that drives the testbed at a
// capacity its model predicts exactly: each user signs up and logs in
// (setup; a user added in the place of one removed takes the token it
// kept in user.session instead), then reads a channel's posts (route GetChannelPosts), with a
// constant think time. One route in the measured window, so with W
// workers and service time S a mean-latency threshold T is crossed at
// W·(think + T)/S users (see Ceiling). Tests and benchmarks use it.
func PostsScenario(think time.Duration) string {
	return fmt.Sprintf(`
def setup(user):
    login(user)
    r = user.http.get("/api/v4/users/me/channels", expect=[200, 401])
    if r.status == 401:
        user.session.clear()  # the server forgot the token: the retry logs in
        fail("session expired")
    user.state["ch"] = [c["id"] for c in r.json()]

%s
def posts(user):
    user.http.get("/api/v4/channels/%%s/posts" %% user.rand.choice(user.state["ch"]), name="GetChannelPosts")

actions = [action("Posts", posts)]
think_time = think.constant("%v")
`, loginFn, think)
}

// loginFn is the testbed scenarios' login(user): it signs the account up
// and logs it in only when user.session holds no token its last user
// kept, and sets the Authorization header.
const loginFn = `
def login(user):
    if "token" not in user.session:  # kept by the account's last user: no login
        name = "u-%d" % user.account
        user.http.post("/api/v4/users", json={"username": name, "password": "pw"}, expect=[201, 409])
        r = user.http.post("/api/v4/users/login", json={"login_id": name, "password": "pw"})
        user.session["token"] = r.headers["token"]
    user.http.headers["Authorization"] = "Bearer " + user.session["token"]
`

// ConnectedScenario is PostsScenario's connected twin: each user also holds the WebSocket and records
// the delivery of every post it receives, and each action creates a post (route CreatePost) in the
// user's first channel. With Config.Channels = 1 every user is in that channel, so a post reaches all N
// connections, and ConnectedCeiling with reach(CreatePost, N) = N gives the ceiling. One route and a
// constant think time, as in PostsScenario, keep the closed loop deterministic: its response time
// follows the model's asymptote right up to the threshold (a mix of routes chosen at random would
// queue before it).
func ConnectedScenario(think time.Duration) string {
	return fmt.Sprintf(`
%s
def setup(user):
    login(user)
    user.state["ch"] = user.http.get("/api/v4/users/me/channels").json()[0]["id"]
    user.ws.connect("/api/v4/websocket", name="WS", on_message=on_event, type_field="event")

def on_event(user, msg):
    ev = msg.json()
    if ev["event"] == "posted":
        delivery.record(ev["data"]["post"], name="posted")

def post(user):
    user.http.post("/api/v4/posts", json={"channel_id": user.state["ch"], "message": "hi " + delivery.stamp()},
                   name="CreatePost", expect=201)

actions = [action("Post", post)]
think_time = think.constant("%v")
`, loginFn, think)
}
