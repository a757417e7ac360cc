package testbed

import (
	"fmt"
	"time"
)

// PostsScenario is the smallest scenario that drives the testbed at a
// capacity its model predicts exactly: each user signs up and logs in
// (setup), then reads a channel's posts (route GetChannelPosts), with a
// constant think time. One route in the measured window, so with W
// workers and service time S a mean-latency threshold T is crossed at
// W·(think + T)/S users (see Ceiling). Tests and benchmarks use it.
func PostsScenario(think time.Duration) string {
	return fmt.Sprintf(`
def setup(user):
    name = "u-%%d" %% user.account
    user.http.post("/api/v4/users", json={"username": name, "password": "pw"}, expect=[201, 409])
    r = user.http.post("/api/v4/users/login", json={"login_id": name, "password": "pw"})
    user.http.headers["Authorization"] = "Bearer " + r.headers["token"]
    user.state["ch"] = [c["id"] for c in user.http.get("/api/v4/users/me/channels").json()]

def posts(user):
    user.http.get("/api/v4/channels/%%s/posts" %% user.rand.choice(user.state["ch"]), name="GetChannelPosts")

actions = [action("Posts", posts)]
think_time = think.constant("%v")
`, think)
}

// ConnectedScenario is PostsScenario's connected twin: each user also holds the WebSocket and records
// the delivery of every post it receives, and each action creates a post (route CreatePost) in the
// user's first channel. With Config.Channels = 1 every user is in that channel, so a post reaches all N
// connections, and ConnectedCeiling with reach(CreatePost, N) = N gives the ceiling. One route and a
// constant think time, as in PostsScenario, keep the closed loop deterministic: its response time
// follows the model's asymptote right up to the threshold (a mix of routes chosen at random would
// queue before it).
func ConnectedScenario(think time.Duration) string {
	return fmt.Sprintf(`
def setup(user):
    name = "u-%%d" %% user.account
    user.http.post("/api/v4/users", json={"username": name, "password": "pw"}, expect=[201, 409])
    r = user.http.post("/api/v4/users/login", json={"login_id": name, "password": "pw"})
    user.http.headers["Authorization"] = "Bearer " + r.headers["token"]
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
`, think)
}
