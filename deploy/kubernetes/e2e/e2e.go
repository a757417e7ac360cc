package main

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/headroom-dev/headroom/deploy/kubernetes/check"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// e2e is one end-to-end run's steps and what they found.
type e2e struct {
	o   options
	cs  kubernetes.Interface
	ns  string
	set *check.Set
	kl  *kubelet
	rep *report

	deleted, replacement podRun
	deletedAt            time.Time
	result               runResult
}

// runResult is what the summary reads of the coordinator's result.json.
type runResult struct {
	Status string `json:"status"`
	Agents struct {
		Agents []struct {
			Name     string  `json:"name"`
			JoinedS  float64 `json:"joined_s"`
			LeftS    float64 `json:"left_s"`
			Lost     string  `json:"lost"`
			Users    int     `json:"users"`
			Requests int64   `json:"requests"`
			Coverage float64 `json:"coverage"`
		} `json:"agents"`
		Faults []struct {
			T      float64 `json:"t"`
			Name   string  `json:"name"`
			Reason string  `json:"reason"`
			Users  int     `json:"users"`
		} `json:"faults"`
	} `json:"agents"`
}

func (e *e2e) agents() int { return int(*e.set.Agents.Spec.Completions) }

// pod returns the newest pod run of a role: the coordinator (index "") or
// an agent's index, started (a process) and not deleted.
func (e *e2e) pod(index string, coordinator bool) (podRun, bool) {
	runs := e.kl.snapshot()
	for i := len(runs) - 1; i >= 0; i-- {
		r := runs[i]
		isCoord := strings.HasPrefix(r.name, check.CoordinatorName+"-")
		if isCoord == coordinator && r.index == index && r.proc != nil && r.deleted.IsZero() {
			return r, true
		}
	}
	return podRun{}, false
}

func (e *e2e) run(ctx context.Context) {
	coord, ok := e.join(ctx)    // 1. every pod runs, every agent joins
	if !ok || !e.replace(ctx) { // 2. an agent pod deleted mid-run is made again and rejoins
		return
	}
	e.complete(ctx)     // 3. the coordinator's Job completes; so does the agents'
	e.fetch(ctx, coord) // 4. the result outlives the coordinator's pod, and is copied out
}

// join waits for every pod to run and every agent to join the
// coordinator, whose pod it returns; false when a check failed.
func (e *e2e) join(ctx context.Context) (podRun, bool) {
	n := e.agents()
	var coord podRun
	err := poll(ctx, 3*time.Minute, func() (bool, error) {
		var ok bool
		if coord, ok = e.pod("", true); !ok {
			return false, nil
		}
		for i := range n {
			if _, ok := e.pod(fmt.Sprint(i), false); !ok {
				return false, nil
			}
		}
		return true, nil
	})
	e.rep.check(err == nil, "the Job controller created the coordinator's pod and %d agent pods, and each runs (%v)", n, errText(err))
	if err != nil {
		return coord, false
	}
	joined := regexp.MustCompile(`agent \d+ joined: (agent-\d+)`)
	var names []string
	err = poll(ctx, 3*time.Minute, func() (bool, error) {
		names = nil
		for _, m := range joined.FindAllStringSubmatch(readFile(coord.proc.log), -1) {
			names = append(names, m[1])
		}
		return len(names) >= n, nil
	})
	e.rep.check(err == nil, "the coordinator says every agent joined: %v (%v)", names, errText(err))
	if e.o.tls {
		ca, _ := check.Flag(e.set.Agents.Spec.Template.Spec.Containers[0].Args, "tls-ca")
		cert, _ := check.Flag(e.set.Coordinator.Spec.Template.Spec.Containers[0].Args, "tls-cert")
		e.rep.check(ca != "" && cert != "" && err == nil, "over TLS: the coordinator serves --tls-cert=%s, the agents verify it with --tls-ca=%s", cert, ca)
	}
	if e.o.coordinatorDelay > 0 {
		var early []string
		said := ""
		for i := range n {
			a, _ := e.pod(fmt.Sprint(i), false)
			line := retried.FindString(readFile(a.proc.log))
			if a.started.Before(coord.started) && line != "" {
				early, said = append(early, a.name), line
			}
		}
		e.rep.check(len(early) == n, "agents started %.1f s before the coordinator and dialed until it answered: %v (%q)",
			coord.started.Sub(e.firstAgentStart()).Seconds(), early, said)
	}
	for i := range n {
		a, _ := e.pod(fmt.Sprint(i), false)
		var users float64
		err := poll(ctx, 90*time.Second, func() (bool, error) {
			u, err := usersActive(ctx, a.ip+":9465")
			users = u
			return err == nil && u > 0, nil
		})
		e.rep.check(err == nil, "agent pod %s (index %d) runs %g users, read at %s:9465/metrics, the scrape annotations' port (%v)", a.name, i, users, a.ip, errText(err))
	}
	return coord, !e.rep.failed
}

// replace deletes agent pod 1 mid-run and waits for the Job controller's
// new pod for index 1 to rejoin; false when it could not go on.
func (e *e2e) replace(ctx context.Context) bool {
	say("waiting %s, then deleting agent pod 1", e.o.deleteAfter)
	select {
	case <-ctx.Done():
		return false
	case <-time.After(e.o.deleteAfter):
	}
	old, _ := e.pod("1", false)
	e.deleted = old
	e.deletedAt = time.Now()
	err := e.cs.CoreV1().Pods(e.ns).Delete(ctx, old.name, metav1.DeleteOptions{})
	e.rep.check(err == nil, "deleted pod %s (agent index 1, pid %d) with the default grace period, as kubectl delete pod does (%v)", old.name, old.proc.cmd.Process.Pid, errText(err))
	if err != nil {
		return false
	}
	var repl podRun
	err = poll(ctx, 2*time.Minute, func() (bool, error) {
		r, ok := e.pod("1", false)
		if ok && r.uid != old.uid {
			repl = r
			return true, nil
		}
		return false, nil
	})
	e.replacement = repl
	if err == nil {
		e.rep.check(true, "the Job controller made pod %s for index 1 (%.1f s after the deletion), and its process was started (pid %d)", repl.name, repl.seen.Sub(e.deletedAt).Seconds(), repl.proc.cmd.Process.Pid)
	} else {
		e.rep.check(false, "no new pod for index 1 within 2 minutes of the deletion (%v)", err)
		return false
	}
	var users float64
	err = poll(ctx, 90*time.Second, func() (bool, error) {
		u, err := usersActive(ctx, repl.ip+":9465")
		users = u
		return err == nil && u > 0, nil
	})
	e.rep.check(err == nil, "the new agent-1 rejoined the run: it runs %g users, read at %s:9465/metrics (%v)", users, repl.ip, errText(err))
	return true
}

// complete waits for both Jobs to complete, and checks that the deleted
// agent left in good order without counting as a failure.
func (e *e2e) complete(ctx context.Context) {
	limit := 3*time.Minute + e.o.ramp + e.o.duration + 2*time.Minute
	job, err := e.waitJob(ctx, check.CoordinatorName, limit)
	e.rep.check(err == nil && finished(job) == batchv1.JobComplete, "Job %s: %s (%v)", check.CoordinatorName, jobState(job), errText(err))
	job, err = e.waitJob(ctx, check.AgentsName, 90*time.Second)
	e.rep.check(err == nil && finished(job) == batchv1.JobComplete, "Job %s: %s (%v)", check.AgentsName, jobState(job), errText(err))
	if d := e.kl.find(e.deleted.uid); d.proc != nil {
		code := d.proc.exitCode()
		e.rep.check(code == 3 && job != nil && job.Status.Failed == 0, "the deleted agent left in good order (exit %d, want 3) and the Job did not count it as a failure (failed %d, podFailurePolicy Ignore)", code, jobFailed(job))
	}
}

// fetch deletes the coordinator's ended pod (as deleting its Job, or its
// TTL, would), applies the results reader as docs/KUBERNETES.md does, and
// copies the result out of it, as kubectl cp would: from the directory of
// its /results mount, the claim the coordinator wrote to.
func (e *e2e) fetch(ctx context.Context, coord podRun) {
	out, _ := check.Flag(e.set.Coordinator.Spec.Template.Spec.Containers[0].Args, "out")
	err := e.cs.CoreV1().Pods(e.ns).Delete(ctx, coord.name, metav1.DeleteOptions{})
	if err == nil {
		err = poll(ctx, time.Minute, func() (bool, error) {
			_, err := os.Stat(filepath.Join(coord.dir, "volumes"))
			return os.IsNotExist(err), nil
		})
	}
	e.rep.check(err == nil, "the coordinator's ended pod %s deleted, and its own volumes with it (%v)", coord.name, errText(err))
	pod, err := check.Reader(e.o.manifests)
	if err == nil {
		_, err = e.cs.CoreV1().Pods(e.ns).Create(ctx, pod, metav1.CreateOptions{})
	}
	var reader podRun
	if err == nil {
		err = poll(ctx, time.Minute, func() (bool, error) {
			for _, r := range e.kl.snapshot() {
				if r.name == pod.Name && r.proc != nil {
					reader = r
					return true, nil
				}
			}
			return false, nil
		})
	}
	e.rep.check(err == nil, "%s applied: pod %s runs, the claim mounted at /results (%v)", check.ReaderFile, pod.Name, errText(err))
	if err != nil {
		return
	}
	rel, _ := strings.CutPrefix(out, "/results/")
	fetched := filepath.Join(e.kl.dir, "fetched", rel)
	err = copyDir(filepath.Join(reader.volumes["/results"], rel), fetched)
	if err == nil {
		err = readJSON(filepath.Join(fetched, "result.json"), &e.result)
	}
	if err == nil {
		_, err = os.Stat(filepath.Join(fetched, "histograms.json"))
	}
	e.rep.check(err == nil, "kubectl cp %s/%s:%s: result.json and histograms.json fetched after the Job ended, into $WORK/fetched/%s (%v)",
		e.ns, pod.Name, out, rel, errText(err))
	var left, rejoined bool
	why := ""
	for _, a := range e.result.Agents.Agents {
		if a.Name == "agent-1" && strings.Contains(a.Lost, "left the run") {
			left, why = true, a.Lost
		}
		rejoined = rejoined || (a.Name == "agent-1" && a.JoinedS > 0 && a.Lost == "")
	}
	e.rep.check(left && rejoined, "result.json: agent-1 left in good order when its pod was deleted (%q) and joined again mid-run (rejoined %v)", why, rejoined)
}

// copyDir copies the files under src into dst, as kubectl cp does.
func copyDir(src, dst string) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		to := filepath.Join(dst, strings.TrimPrefix(path, src))
		if d.IsDir() {
			return os.MkdirAll(to, 0o700)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(to, b, 0o600)
	})
}

// retried is the line an agent writes when it dials again.
var retried = regexp.MustCompile(`headroom agent: .*trying again.*`)

func (e *e2e) firstAgentStart() time.Time {
	var first time.Time
	for _, r := range e.kl.snapshot() {
		if r.index != "" && r.proc != nil && (first.IsZero() || r.started.Before(first)) {
			first = r.started
		}
	}
	return first
}

func (e *e2e) waitJob(ctx context.Context, name string, timeout time.Duration) (*batchv1.Job, error) {
	var job *batchv1.Job
	err := poll(ctx, timeout, func() (bool, error) {
		j, err := e.cs.BatchV1().Jobs(e.ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		job = j
		return finished(j) != "", nil
	})
	return job, err
}

// finished is the Job's terminal condition, or "".
func jobFailed(j *batchv1.Job) int32 {
	if j == nil {
		return -1
	}
	return j.Status.Failed
}

func finished(j *batchv1.Job) batchv1.JobConditionType {
	if j == nil {
		return ""
	}
	for _, c := range j.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return c.Type
		}
	}
	return ""
}

func jobState(j *batchv1.Job) string {
	if j == nil {
		return "not read"
	}
	s := string(finished(j))
	if s == "" {
		s = "not finished"
	}
	return fmt.Sprintf("%s (succeeded %d, failed %d, active %d)", s, j.Status.Succeeded, j.Status.Failed, j.Status.Active)
}

func errText(err error) string {
	if err == nil {
		return "ok"
	}
	return err.Error()
}

func (e *e2e) summary() {
	fmt.Println()
	fmt.Println("== pods (no kubelet: this harness ran each as a process of headroom, its pod IP a loopback address)")
	fmt.Printf("  %-34s %-5s %-12s %-8s %-9s %-9s %-5s %s\n", "pod", "index", "pod IP", "pid", "started", "ended", "exit", "deleted")
	for _, r := range e.kl.snapshot() {
		pid, code, started, ended, del := "-", "-", "-", "-", ""
		if r.proc != nil {
			pid = fmt.Sprint(r.proc.cmd.Process.Pid)
			started = fmt.Sprintf("%.1fs", r.started.Sub(t0).Seconds())
			if r.proc.exited() {
				code = fmt.Sprint(r.proc.exitCode())
			}
		}
		if !r.ended.IsZero() {
			ended = fmt.Sprintf("%.1fs", r.ended.Sub(t0).Seconds())
		}
		if !r.deleted.IsZero() {
			del = fmt.Sprintf("at %.1fs", r.deleted.Sub(t0).Seconds())
		}
		fmt.Printf("  %-34s %-5s %-12s %-8s %-9s %-9s %-5s %s\n", r.name, r.index, r.ip, pid, started, ended, code, del)
	}
	if len(e.result.Agents.Agents) > 0 {
		fmt.Println("== agents in the coordinator's result.json (status " + e.result.Status + ")")
		for _, a := range e.result.Agents.Agents {
			joined, left := "at the start", "stayed to the end"
			if a.JoinedS > 0 {
				joined = fmt.Sprintf("at %.1f s", a.JoinedS)
			}
			if a.Lost != "" {
				left = fmt.Sprintf("lost at %.1f s: %s", a.LeftS, a.Lost)
			}
			fmt.Printf("  %-8s joined %-13s requests %5d  coverage %.2f  %s\n", a.Name, joined, a.Requests, a.Coverage, left)
		}
		for _, f := range e.result.Agents.Faults {
			fmt.Printf("  fault at %.1fs: %s %s (%d users moved)\n", f.T, f.Name, f.Reason, f.Users)
		}
	}
	fmt.Println("== checks")
	for _, c := range e.rep.checks {
		fmt.Println("  " + c)
	}
	if e.rep.failed {
		fmt.Println("RESULT: FAIL")
	} else {
		fmt.Println("RESULT: PASS")
	}
}
