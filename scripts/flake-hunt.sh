#!/usr/bin/env bash
# flake-hunt.sh — the tests run again and again as a newcomer's machine meets them: each run in a fresh
# clone, alone or beside busy loops (CPU-bound processes that take the cores from the tests), and a report
# of every failure with its package and test. A test that fails here once will fail a newcomer some day.
#
#   ./scripts/flake-hunt.sh                                   # the test command: 5 runs beside 2 busy loops, 3 alone
#   ./scripts/flake-hunt.sh --alone 0 --busy 10 ./runner      # chosen packages: go test -count=1 PACKAGES
#   ./scripts/flake-hunt.sh --alone 2 --busy 2 --race ./engine ./agents   # the same under the race detector
#
# Options:
#   --alone N    runs with nothing added beside them (3)
#   --busy N     runs beside the busy loops (5); the two kinds take turns, busy first, so a
#                short hunt meets both
#   --hogs K     busy loops beside a busy run (2: one a core on the 2-core machines CI uses)
#   --race       chosen packages under -race (the test command has its own race stage)
#   --commit REV what to clone (HEAD); uncommitted changes are not in the clone, and it says so
#   --out DIR    the logs and the report (flake-hunt-YYYYmmdd-HHMMSS under $TMPDIR, or /tmp)
#
# The report, DIR/report.md, gains a row as each run ends, so an interrupted hunt keeps what it found; each
# run's whole output is DIR/run-N.log. It exits 1 when a run failed. A full run of the test command takes
# ~10 minutes alone on 2 cores, and longer beside busy loops: 8 runs are an afternoon.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)

alone=3 busy=5 hogs=2 race="" commit=HEAD out="" pkgs=()
die() { echo "flake-hunt: $*" >&2; exit 2; }
while (($#)); do
	case $1 in
	--alone | --busy | --hogs | --commit | --out) [[ $# -ge 2 ]] || die "$1 needs a value" ;;&
	--alone) alone=$2 && shift 2 ;;
	--busy) busy=$2 && shift 2 ;;
	--hogs) hogs=$2 && shift 2 ;;
	--commit) commit=$2 && shift 2 ;;
	--out) out=$2 && shift 2 ;;
	--race) race=-race && shift ;;
	-h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' && exit 0 ;;
	-*) die "unknown option $1 (see --help)" ;;
	*) pkgs+=("$1") && shift ;;
	esac
done
for n in "$alone" "$busy" "$hogs"; do [[ $n =~ ^[0-9]+$ ]] || die "$n: want a whole number"; done
((alone + busy > 0)) || die "no runs asked for (--alone 0 --busy 0)"
[[ -z $race || ${#pkgs[@]} -gt 0 ]] || die "--race is for chosen packages; the test command runs its own race stage"
rev=$(git rev-parse --verify "$commit^{commit}" 2>/dev/null) || die "--commit $commit: no such commit"
[[ -z $(git status --porcelain --untracked-files=no) ]] ||
	echo "flake-hunt: the working tree has uncommitted changes; the runs test $(git rev-parse --short "$rev") without them" >&2
out=${out:-${TMPDIR:-/tmp}/flake-hunt-$(date -u +%Y%m%d-%H%M%S)}
mkdir -p "$out"
report=$out/report.md

if ((${#pkgs[@]})); then
	what="go test -count=1 -timeout 14m${race:+ $race} ${pkgs[*]}"
	run_cmd() { go test -count=1 -timeout 14m $race "${pkgs[@]}"; }
else
	what="the test command (CI=true ./scripts/test.sh)"
	run_cmd() { CI=true ./scripts/test.sh; }
fi

hog_pids=() clone=""
stop_hogs() {
	((${#hog_pids[@]})) && kill "${hog_pids[@]}" 2>/dev/null
	hog_pids=()
	return 0
}
cleanup() {
	stop_hogs
	[[ -z $clone ]] || rm -rf "$clone"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
start_hogs() {
	for _ in $(seq 1 "$hogs"); do
		bash -c 'while :; do :; done' &
		hog_pids+=($!)
	done
}

# failures LOG: each failed test as "package: Test/sub", from go test's plain output, where a package's
# "--- FAIL" lines come before its "FAIL<tab>package" line; a failure with no test named (a build, a
# timeout, a script's own check) as its last lines.
failures() {
	awk '
		/^[ \t]*--- FAIL: / { t[n++] = $3; next }
		/^panic: test timed out/ { t[n++] = "(timed out)"; running = 1; next }
		running && /^\t[A-Z]/ { t[n++] = $1 " (running when it timed out)"; next }
		{ running = running && /^running tests:/ }
		/^(FAIL|ok)[ \t]+[^ \t]+[ \t]/ {
			if ($1 == "FAIL") { if (n == 0) print $2 ": (no test named: build or exit)"; for (i = 0; i < n; i++) print $2 ": " t[i]; found = 1 }
			n = 0
		}
		END { for (i = 0; i < n; i++) { print "?: " t[i]; found = 1 } }
	' "$1"
}

dur() { printf '%dm%02ds' $(($1 / 60)) $(($1 % 60)); }

{
	echo "# flake hunt, $(date -u '+%Y-%m-%d %H:%M') UTC"
	echo
	echo "Commit $(git log -1 --format='%h (%s)' "$rev"); $what; $busy runs beside $hogs busy loops and $alone alone, taking turns."
	echo "Machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(uname -sr); load average at the start $(cut -d' ' -f1-3 /proc/loadavg)."
	echo
	echo "| run | beside | took | result | failed |"
	echo "|---|---|---|---|---|"
} >"$report"

total=$((alone + busy)) failed=0 passed_alone=0 passed_busy=0
declare -A took_by=() failed_tests=()
order=() a=$alone b=$busy
while ((a + b)); do
	((b)) && order+=(busy) && b=$((b - 1))
	((a)) && order+=(alone) && a=$((a - 1))
done
for i in $(seq 1 "$total"); do
	beside=alone
	[[ ${order[i - 1]} == alone ]] || beside="$hogs busy loops"
	clone=$(mktemp -d "${TMPDIR:-/tmp}/flake-hunt-clone.XXXXXX")
	git clone -q --no-checkout "$repo" "$clone/headroom"
	git -C "$clone/headroom" checkout -q "$rev"
	echo "flake-hunt: run $i of $total ($beside) in $clone/headroom, begun $(date -u +%H:%M:%S); its output: $out/run-$i.log"
	[[ $beside == alone ]] || start_hogs
	began=$SECONDS
	if (cd "$clone/headroom" && run_cmd) >"$out/run-$i.log" 2>&1; then
		result=pass
	else
		result="FAIL (exit $?)"
	fi
	took=$((SECONDS - began))
	stop_hogs
	rm -rf "$clone"
	clone=""
	names=""
	if [[ $result != pass ]]; then
		failed=$((failed + 1))
		names=$(failures "$out/run-$i.log" | sort -u)
		[[ -n $names ]] || names="(no test named; last line: $(tail -n 1 "$out/run-$i.log"))"
		while IFS= read -r n; do failed_tests[$n]=$((${failed_tests[$n]:-0} + 1)); done <<<"$names"
	elif [[ $beside == alone ]]; then
		passed_alone=$((passed_alone + 1))
	else
		passed_busy=$((passed_busy + 1))
	fi
	took_by[$beside]+="$took "
	echo "| $i | $beside | $(dur "$took") | $result | $(tr '\n' ';' <<<"$names" | sed 's/;$//; s/;/; /g') |" >>"$report"
	echo "flake-hunt: run $i: $result in $(dur "$took")${names:+: $(tr '\n' ' ' <<<"$names")}"
done

median() { tr ' ' '\n' <<<"$1" | grep . | sort -n | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : int((a[NR / 2] + a[NR / 2 + 1]) / 2)}'; }
{
	echo
	echo "$total runs, $failed failed: $passed_alone of $alone passed alone, $passed_busy of $busy beside $hogs busy loops."
	for b in "${!took_by[@]}"; do echo "Median time $b: $(dur "$(median "${took_by[$b]}")")."; done
	if ((${#failed_tests[@]})); then
		echo
		echo "Failures by test (runs):"
		for n in "${!failed_tests[@]}"; do echo "- $n (${failed_tests[$n]})"; done
	fi
} >>"$report"
echo
cat "$report"
((failed == 0))
