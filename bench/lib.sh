# Shared helpers for the benchmark scripts in bench/. Source it; do not run it.
#
#   source "$(dirname "$0")/lib.sh"
#
# Every server started here binds 127.0.0.1 only and is stopped by PID from
# the caller's EXIT trap (see bench_cleanup).

BENCH_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BENCH_PIDS=()   # processes to stop on exit, newest last

log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "error: $*"; exit 1; }

# need CMD PACKAGE: installs the Debian package when CMD is missing.
need() {
	local cmd=$1 pkg=$2
	command -v "$cmd" >/dev/null 2>&1 && return 0
	log "installing $pkg (for $cmd)"
	if [ -z "${BENCH_APT_UPDATED:-}" ]; then
		DEBIAN_FRONTEND=noninteractive apt-get update -qq
		BENCH_APT_UPDATED=1
	fi
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$pkg" >/dev/null
	command -v "$cmd" >/dev/null 2>&1 || die "$pkg installed but $cmd is still missing"
}

# build_headroom: builds the CLI from this tree into $WORK/headroom and sets
# HEADROOM, unless HEADROOM already names an executable (then it is used as is).
build_headroom() {
	if [ -n "${HEADROOM:-}" ]; then
		[ -x "$HEADROOM" ] || die "HEADROOM=$HEADROOM is not an executable"
		log "using headroom $HEADROOM"
		return 0
	fi
	command -v go >/dev/null || die "go is required to build headroom (or set HEADROOM=/path/to/headroom)"
	HEADROOM=$WORK/headroom
	log "building headroom -> $HEADROOM"
	(cd "$BENCH_ROOT" && go build -o "$HEADROOM" ./cmd/headroom)
}

# free_port: prints a TCP port nothing listens on at 127.0.0.1.
free_port() {
	local p
	for _ in $(seq 1 200); do
		p=$((20000 + RANDOM % 12000))
		if [ -z "$(ss -Htln "( sport = :$p )" 2>/dev/null)" ]; then
			echo "$p"
			return 0
		fi
	done
	die "no free port found"
}

# wait_port PORT SECONDS: waits until 127.0.0.1:PORT accepts connections.
wait_port() {
	local port=$1 deadline=$((SECONDS + $2))
	while [ $SECONDS -lt "$deadline" ]; do
		if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
			return 0
		fi
		sleep 0.1
	done
	return 1
}

# start_nginx DIR PORT CPU WORKER_CONNECTIONS KEEPALIVE_TIMEOUT
# Starts nginx in the foreground of a background job (daemon off), one
# worker, pinned to CPU ("" = not pinned), serving a 13-byte body on every
# path at 127.0.0.1:PORT with no access log and (almost) unlimited
# keep-alive requests. Sets NGINX_PID. With TLS_LISTEN ("ssl http2", say),
# TLS_CERT and TLS_KEY (PEM files) set, it listens with those parameters
# and that certificate.
start_nginx() {
	local dir=$1 port=$2 cpu=$3 wc=$4 kat=$5 tls=""
	mkdir -p "$dir/tmp"
	[ -n "${TLS_CERT:-}" ] && tls="ssl_certificate $TLS_CERT; ssl_certificate_key $TLS_KEY;"
	cat >"$dir/nginx.conf" <<CONF
worker_processes 1;
worker_rlimit_nofile $(ulimit -n);
daemon off;
master_process on;
pid $dir/nginx.pid;
error_log $dir/error.log warn;
events {
    worker_connections $wc;
    multi_accept on;
}
http {
    access_log off;
    client_body_temp_path $dir/tmp/body;
    proxy_temp_path $dir/tmp/proxy;
    fastcgi_temp_path $dir/tmp/fastcgi;
    uwsgi_temp_path $dir/tmp/uwsgi;
    scgi_temp_path $dir/tmp/scgi;
    keepalive_requests 1000000;
    keepalive_timeout $kat;
    server {
        listen 127.0.0.1:$port ${TLS_LISTEN:-} backlog=4096;
        $tls
        location / {
            default_type text/plain;
            return 200 "Hello, World!";
        }
    }
}
CONF
	local pin=()
	[ -n "$cpu" ] && pin=(taskset -c "$cpu")
	# Warnings (e.g. worker_connections above the open-files limit, which is
	# fine: see idle-memory.sh) go to files, not to the report.
	"${pin[@]}" nginx -p "$dir" -c "$dir/nginx.conf" -e "$dir/error.log" -t -q 2>"$dir/test.log" ||
		die "bad nginx config $dir/nginx.conf: $(cat "$dir/test.log")"
	"${pin[@]}" nginx -p "$dir" -c "$dir/nginx.conf" -e "$dir/error.log" 2>"$dir/stderr.log" &
	NGINX_PID=$!
	BENCH_PIDS+=("$NGINX_PID")
	wait_port "$port" 10 || die "nginx did not start on port $port: $(tail -5 "$dir/error.log")"
	log "nginx pid $NGINX_PID on 127.0.0.1:$port${cpu:+ (cpu $cpu)}, worker_connections $wc"
}

# watched NAME CMD...: waits for the machine to be quiet (QUIET_WAIT
# seconds at most), then runs CMD under /usr/bin/time and sets (NGINX_PID
# the server's, WORK the scratch directory):
#   ELAPSED      wall seconds
#   CLIENT_CPU_S CMD's user+system CPU seconds
#   NGINX_PCT    nginx's CPU, in % of one core
#   OTHERS_PCT   CPU used by anything but CMD and nginx (other work on the
#                machine, and kernel work not charged to a process such as
#                interrupts), in % of all cores
#   STEAL_PCT    time the hypervisor gave to other guests, in % of all cores
watched() {
	local name=$1 tm=$WORK/$1.time
	shift
	local b0 s0 n0 t0 b1 s1 n1 t1 hz ncpu
	hz=$(getconf CLK_TCK) ncpu=$(nproc)
	wait_quiet "$QUIET_WAIT"
	read -r b0 s0 < <(cpu_ticks)
	n0=$(tree_ticks "$NGINX_PID")
	t0=$(date +%s.%N)
	/usr/bin/time -f '%U %S' -o "$tm" "$@"
	t1=$(date +%s.%N)
	n1=$(tree_ticks "$NGINX_PID")
	read -r b1 s1 < <(cpu_ticks)
	ELAPSED=$(calc "$t1 - $t0")
	CLIENT_CPU_S=$(awk '{print $1 + $2}' "$tm")
	NGINX_PCT=$(calc "100 * ($n1 - $n0) / ($ELAPSED * $hz)")
	OTHERS_PCT=$(calc "100 * ($b1 - $b0 - ($n1 - $n0) - $CLIENT_CPU_S * $hz) / ($ELAPSED * $hz * $ncpu)")
	STEAL_PCT=$(calc "100 * ($s1 - $s0) / ($ELAPSED * $hz * $ncpu)")
}

# bench_cleanup: stops every process in BENCH_PIDS by PID (TERM, then KILL)
# and removes $WORK unless KEEP is set. Use as: trap bench_cleanup EXIT
bench_cleanup() {
	local pid i
	for ((i = ${#BENCH_PIDS[@]} - 1; i >= 0; i--)); do
		pid=${BENCH_PIDS[$i]}
		if kill -0 "$pid" 2>/dev/null; then
			kill -TERM "$pid" 2>/dev/null || true
			for _ in $(seq 1 50); do
				kill -0 "$pid" 2>/dev/null || break
				sleep 0.1
			done
			kill -KILL "$pid" 2>/dev/null || true
			wait "$pid" 2>/dev/null || true
		fi
	done
	if [ -n "${WORK:-}" ] && [ -z "${KEEP:-}" ]; then
		rm -rf "$WORK"
	fi
}

# bench_workdir NAME: sets WORK to $OUT (kept afterwards) or a fresh temp dir,
# and installs the cleanup traps. Call it from the script, not a subshell.
bench_workdir() {
	if [ -n "${OUT:-}" ]; then
		mkdir -p "$OUT"
		WORK=$(cd "$OUT" && pwd)
		KEEP=1
	else
		WORK=$(mktemp -d "/tmp/headroom-$1.XXXXXX")
	fi
	trap bench_cleanup EXIT
	trap 'exit 130' INT TERM
}

# median NUMBER...: prints the median.
median() {
	printf '%s\n' "$@" | sort -g | awk '{a[NR] = $1} END {
		if (NR == 0) { print "nan"; exit }
		if (NR % 2) print a[(NR + 1) / 2]; else print (a[NR / 2] + a[NR / 2 + 1]) / 2 }'
}

# calc EXPR: floating-point arithmetic, e.g. calc "1/3" -> 0.333333
calc() { awk "BEGIN { printf \"%.6g\n\", $1 }"; }

# cpu_ticks: prints the machine's busy ticks (user+nice+system+irq+softirq,
# all cores) and its steal ticks (time the hypervisor gave to other guests).
cpu_ticks() { awk '/^cpu / {print $2 + $3 + $4 + $7 + $8, $9}' /proc/stat; }

# tree_ticks PID: CPU ticks (user+system) used so far by PID's children
# (e.g. nginx's workers), plus PID itself.
tree_ticks() {
	local p t=0
	for p in "$1" $(pgrep -P "$1" || true); do
		[ -r "/proc/$p/stat" ] || continue
		# Fields after the ")" that closes the command name: utime is the 12th, stime the 13th.
		t=$((t + $(sed 's/.*) //' "/proc/$p/stat" | awk '{print $12 + $13}')))
	done
	echo "$t"
}

# wait_quiet MAX_SECONDS [PERCENT]: waits until the machine is quiet (busy
# below PERCENT, default 10, and steal below 2%, of all cores over
# two seconds), at most MAX_SECONDS; other work on a shared machine, or a
# busy hypervisor, skews a CPU-bound benchmark.
wait_quiet() {
	local max=$1 pct=${2:-10} deadline=$((SECONDS + $1)) b0 s0 b1 s1 busy steal cap
	cap=$(($(getconf CLK_TCK) * $(nproc) * 2))
	while :; do
		read -r b0 s0 < <(cpu_ticks)
		sleep 2
		read -r b1 s1 < <(cpu_ticks)
		busy=$(calc "100 * ($b1 - $b0) / $cap")
		steal=$(calc "100 * ($s1 - $s0) / $cap")
		if awk -v b="$busy" -v s="$steal" -v p="$pct" 'BEGIN { exit !(b < p && s < 2) }'; then
			return 0
		fi
		if [ $SECONDS -ge "$deadline" ]; then
			log "machine still busy (${busy}% of all cores used, ${steal}% stolen) after ${max}s: measuring anyway"
			return 0
		fi
	done
}

# start_testbed PORT ARGS...: starts bin/headroom testbed on 127.0.0.1:PORT
# with ARGS (e.g. --workers 8 --scale 2), waits until it answers, and sets
# TESTBED to its PID. stop_testbed stops it by that PID; scripts call it
# from their EXIT trap and between runs.
TESTBED=""
start_testbed() {
	local port=$1 log
	shift
	# Only a testbed this script started is loaded: a port that answers
	# already is another server's, and the testbed is up once it says it
	# listens, not when the port answers.
	if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
		die "127.0.0.1:$port is taken by another server; the benchmarks load only the testbed they start: choose a free port"
	fi
	log=$(mktemp)
	bin/headroom testbed --listen "127.0.0.1:$port" "$@" 2>"$log" &
	TESTBED=$!
	for _ in $(seq 50); do
		grep -q "testbed listening on http://127.0.0.1:$port " "$log" && { rm -f "$log"; return 0; }
		kill -0 "$TESTBED" 2>/dev/null || break
		sleep 0.1
	done
	cat "$log" >&2
	rm -f "$log"
	die "testbed did not start on port $port"
}
stop_testbed() {
	[[ -n $TESTBED ]] && kill "$TESTBED" 2>/dev/null && wait "$TESTBED" 2>/dev/null
	TESTBED=""
}

# go_tool NAME MODULE VERSION VAR: prints the path of NAME built once from the
# Go module MODULE at VERSION (`go install`) into
# ${HEADROOM_CACHE:-~/.cache/headroom}/NAME-VERSION/; VAR is the variable
# that would name a binary instead, for the error message.
go_tool() {
	local name=$1 module=$2 version=$3 var=$4
	local dir=${HEADROOM_CACHE:-$HOME/.cache/headroom}/$name-$version
	if [ ! -x "$dir/$name" ]; then
		command -v go >/dev/null || die "go is required to build $name $version (or set $var=/path/to/$name)"
		log "building $name $version -> $dir/$name (go install $module@$version; once)" >&2
		mkdir -p "$dir"
		(cd "$dir" && GOBIN=$dir GOFLAGS=-buildvcs=false go install "$module@$version") >&2 ||
			die "could not build $name $version"
	fi
	echo "$dir/$name"
}

# find_k6: sets K6_BIN to k6 $K6_VERSION (default v1.8.1, the version the
# figures in docs/BENCHMARKS.md were measured with): $K6_BIN if set, else a
# k6 on PATH that reports that version, else one built once from the Go module
# go.k6.io/k6 at that version (`go install`, ~2 minutes on 2 cores) into
# ${HEADROOM_CACHE:-~/.cache/headroom}/k6-$K6_VERSION/. k6 is not in Debian.
# Run it with --no-usage-report (it would otherwise call home at the end).
find_k6() {
	K6_VERSION=${K6_VERSION:-v1.8.1}
	if [ -n "${K6_BIN:-}" ]; then
		[ -x "$K6_BIN" ] || die "K6_BIN=$K6_BIN is not an executable"
	elif command -v k6 >/dev/null 2>&1 && k6 version 2>/dev/null | grep -q "k6 $K6_VERSION "; then
		K6_BIN=$(command -v k6)
	else
		K6_BIN=$(go_tool k6 go.k6.io/k6 "$K6_VERSION" K6_BIN) || exit 1
	fi
	log "using $("$K6_BIN" version | head -1) ($K6_BIN)"
}

# find_vegeta: sets VEGETA_BIN to vegeta $VEGETA_VERSION (default v12.13.0): $VEGETA_BIN if set, else
# one built once from the Go module github.com/tsenart/vegeta/v12 at that version into
# ${HEADROOM_CACHE:-~/.cache/headroom}/vegeta-$VEGETA_VERSION/. vegeta is not in Debian.
find_vegeta() {
	VEGETA_VERSION=${VEGETA_VERSION:-v12.13.0}
	if [ -n "${VEGETA_BIN:-}" ]; then
		[ -x "$VEGETA_BIN" ] || die "VEGETA_BIN=$VEGETA_BIN is not an executable"
	else
		VEGETA_BIN=$(go_tool vegeta github.com/tsenart/vegeta/v12 "$VEGETA_VERSION" VEGETA_BIN) || exit 1
	fi
	log "using vegeta $VEGETA_VERSION ($VEGETA_BIN)"
}

# scrape URL NAME [LABEL_MATCH]: the sum of the samples of metric NAME whose
# labels contain LABEL_MATCH, from the Prometheus text at URL.
scrape() {
	curl -fsS --max-time 5 "$1" | awk -v name="$2" -v want="${3:-}" '
		$0 ~ "^" name "({| )" && index($0, want) { sum += $NF }
		END { printf "%.0f\n", sum }'
}

# wait_ready METRICS_URL USERS PID SECONDS ERRFILE: waits until headroom's
# loadtest_users_ready at METRICS_URL reaches USERS; dies (with ERRFILE's
# tail) if PID exits first or SECONDS pass.
wait_ready() {
	local url=$1 want=$2 pid=$3 deadline=$((SECONDS + $4)) err=$5 ready=0
	while [ $SECONDS -lt "$deadline" ]; do
		ready=$(scrape "$url" loadtest_users_ready 2>/dev/null) || ready=0
		[ "$ready" -ge "$want" ] && return 0
		kill -0 "$pid" 2>/dev/null || die "headroom exited early: $(tail -5 "$err")"
		sleep 0.5
	done
	die "only $ready of $want users set up in $4 s: $(tail -5 "$err")"
}
