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
    name = "u-%%d" %% user.id
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
