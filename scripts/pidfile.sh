# pidfile.sh — what synapse.sh, centrifugo.sh and mattermost.sh share: a server started into a directory,
# with its PID in DIR/NAME.pid, is known by that PID and its command line, waited for until it answers, and
# stopped by it. Sourced.

# running_as NAME DIR CMDLINE: true when DIR/NAME.pid names a live process whose command line holds
# CMDLINE (a PID is reused once its process is gone, so the PID alone does not say it is still ours).
running_as() {
	local pid
	[[ -f $2/$1.pid ]] || return 1
	pid=$(cat "$2/$1.pid")
	[[ $pid =~ ^[0-9]+$ ]] || return 1
	tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "$3"
}

# stop_pidfile NAME DIR: stops the server of DIR (the calling script's `running DIR` says whether it
# runs) with TERM, then KILL after 10 s, and removes its PID file.
stop_pidfile() {
	local name=$1 dir=$2 pid
	if ! running "$dir"; then
		rm -f "$dir/$name.pid"
		echo "$name: not running on $dir"
		return 0
	fi
	pid=$(cat "$dir/$name.pid")
	kill -TERM "$pid"
	for _ in $(seq 1 100); do # 10 s, then KILL
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	if kill -0 "$pid" 2>/dev/null; then
		kill -KILL "$pid" 2>/dev/null || true
		echo "$name: pid $pid did not stop within 10s of TERM; killed"
	fi
	rm -f "$dir/$name.pid"
	echo "$name: stopped pid $pid"
}

# await_answer NAME DIR PID URL TIMEOUT TITLE LOG...: waits until URL answers. When the server (PID, in
# DIR/NAME.pid) exits first, or TIMEOUT seconds pass (it is then stopped), dies (the caller's `die`) with the
# last lines of each LOG, and removes its PID file.
await_answer() {
	local name=$1 dir=$2 pid=$3 url=$4 timeout=$5 title=$6 why="" f
	shift 6
	local deadline=$((SECONDS + timeout))
	until curl -fsS -o /dev/null --max-time 2 "$url" 2>/dev/null; do
		if ! kill -0 "$pid" 2>/dev/null; then
			why="exited before it answered $url"
		elif ((SECONDS >= deadline)); then
			kill -TERM "$pid" 2>/dev/null || true
			why="did not answer $url within ${timeout}s (stopped; a busy machine: raise START_TIMEOUT)"
		fi
		if [[ -n $why ]]; then
			rm -f "$dir/$name.pid"
			die "start: $title (pid $pid) $why. Last lines of its output:
$(for f in "$@"; do tail -n 15 "$f" 2>/dev/null; done)"
		fi
		sleep 0.2
	done
}
