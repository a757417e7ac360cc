#!/usr/bin/env bash
# The opt-in end-to-end check of deploy/kubernetes (docs/KUBERNETES.md),
# not part of ./scripts/test.sh: a real Kubernetes control plane on this
# machine, built from pinned Go modules (deploy/kubernetes/e2e/go.mod:
# kube-apiserver and kube-controller-manager of k8s.io/kubernetes v1.33.0,
# each k8s.io staging module replaced by its v0.33.0 release; etcd from
# go.etcd.io/etcd/server/v3 v3.5.21's embed package), the manifests applied
# as `kubectl apply -k` renders them, and a harness in the kubelet's place
# that runs each pod the Job controller creates as a local process of
# headroom (there is no kubelet, no container runtime and no image here).
# Against headroom's testbed, it shows that the agents join the coordinator,
# that an agent pod deleted mid-run is made again by the Job controller and
# rejoins, that the coordinator's Job completes, and that its result,
# on the results claim, is copied out through the reader pod after the
# Job has ended; then prints a summary.
#
#   ./scripts/kube-e2e.sh install   # build the control plane into the cache (~11 min and
#                                   # ~870 MB of module cache cold; instant after)
#   ./scripts/kube-e2e.sh           # install if needed, then the check (~2 minutes)
#
# Everything listens on 127.0.0.0/8 (pods get 127.0.1.N); certificates and
# keys are made fresh in a temporary directory; every process is stopped by
# PID at the end (and dies with the harness: Pdeathsig).
#
# Environment:
#   USERS (20), RAMP (5s), DURATION (60s)   the coordinator's load against the testbed
#   DELETE_AFTER (20s)   delete agent pod 1 this long after every agent joined
#   TIMEOUT (10m)        the whole check's limit
#   TLS (1)              apply deploy/kubernetes, TLS, with its Secret headroom-tls made for it (a CA
#                        and a certificate); 0: deploy/kubernetes-plaintext, the overlay without TLS
#   KEEP (0)             1: keep the working directory (kept anyway on failure)
#   HEADROOM_CACHE       where the binaries live ($HOME/.cache/headroom by default)
#   GO (go)              the Go that builds them (1.26 or later)
#
# Exit codes: 0 every check passed, 1 a check failed or a build failed,
# 2 usage.
set -euo pipefail

K8S_VERSION=1.33.0
K8S_COMMIT=60a317eadfcb839692a68eab88b2096f4d708f4f # v1.33.0's tag, stamped as its release builds do
ROOT=$(cd "$(dirname "$0")/.." && pwd)
MODULE=$ROOT/deploy/kubernetes/e2e
INSTALL_DIR=${HEADROOM_CACHE:-$HOME/.cache/headroom}/kube-$K8S_VERSION
STAMP=$INSTALL_DIR/.headroom-installed # the sha256 of the go.mod and go.sum built
GO=${GO:-go}

die() {
	echo "kube-e2e.sh: $*" >&2
	exit 1
}

usage() {
	sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
	exit 2
}

module_hash() { cat "$MODULE/go.mod" "$MODULE/go.sum" | sha256sum | cut -d' ' -f1; }

installed() {
	[[ -x $INSTALL_DIR/kube-apiserver && -x $INSTALL_DIR/kube-controller-manager && -x $INSTALL_DIR/etcd &&
		-f $STAMP && $(cat "$STAMP") == "$(module_hash)" ]]
}

install() {
	if installed; then
		echo "kubernetes $K8S_VERSION control plane: installed in $INSTALL_DIR"
		return 0
	fi
	mkdir -p "$(dirname "$INSTALL_DIR")"
	local lock
	exec {lock}>"$INSTALL_DIR.lock"
	flock "$lock"
	installed && return 0
	command -v "$GO" >/dev/null || die "install: $GO not found; install Go 1.26 or later (or set GO=/path/to/go)"
	echo "kubernetes $K8S_VERSION control plane: building into $INSTALL_DIR (pinned modules of ${MODULE#"$ROOT"/}/go.mod; ~11 minutes and ~870 MB of module cache the first time)"
	rm -rf "$INSTALL_DIR"
	mkdir -p "$INSTALL_DIR"
	local v=k8s.io/component-base/version
	local ldflags
	ldflags="-X $v.gitVersion=v$K8S_VERSION -X $v.gitMajor=${K8S_VERSION%%.*} -X $v.gitMinor=$(cut -d. -f2 <<<"$K8S_VERSION") -X $v.gitCommit=$K8S_COMMIT -X $v.gitTreeState=clean"
	local p
	for p in k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager ./cmd/etcd; do
		echo "  go build $p"
		(cd "$MODULE" && GOWORK=off "$GO" build -mod=readonly -ldflags "$ldflags" -o "$INSTALL_DIR/$(basename "$p").part" "$p") ||
			die "install: go build $p failed (above); the next install starts over"
	done
	local says
	for p in kube-apiserver kube-controller-manager; do
		says=$("$INSTALL_DIR/$p.part" --version 2>&1) || die "install: $p does not run: $says"
		[[ $says == "Kubernetes v$K8S_VERSION" ]] || die "install: $p says \"$says\", not Kubernetes v$K8S_VERSION"
	done
	for p in kube-apiserver kube-controller-manager etcd; do mv "$INSTALL_DIR/$p.part" "$INSTALL_DIR/$p"; done
	module_hash >"$STAMP"
	echo "kubernetes $K8S_VERSION control plane: installed in $INSTALL_DIR"
}

check() {
	install
	tmp=$(mktemp -d) # global: the EXIT trap reads it after check returns
	harness=""
	trap 'if [[ -n $harness ]]; then kill "$harness" 2>/dev/null || true; wait "$harness" 2>/dev/null || true; fi; rm -rf "$tmp"' EXIT
	echo "== building headroom (CGO_ENABLED=0, as the Dockerfile does) and the harness"
	(cd "$ROOT" && CGO_ENABLED=0 "$GO" build -o "$tmp/headroom" ./cmd/headroom) || die "go build ./cmd/headroom failed"
	(cd "$MODULE" && GOWORK=off "$GO" build -mod=readonly -o "$tmp/e2e" .) || die "go build of the harness failed"
	echo "== the check"
	local keep=()
	[[ ${KEEP:-0} == 1 ]] && keep+=(-keep)
	if [[ ${TLS:-1} == 1 ]]; then keep+=(-tls=true); else keep+=(-tls=false); fi
	"$tmp/e2e" -bin-dir "$INSTALL_DIR" -headroom "$tmp/headroom" -manifests "$ROOT/deploy/kubernetes" \
		-users "${USERS:-20}" -ramp "${RAMP:-5s}" -duration "${DURATION:-60s}" \
		-delete-after "${DELETE_AFTER:-20s}" -timeout "${TIMEOUT:-10m}" "${keep[@]}" &
	harness=$!
	local code=0
	wait "$harness" || code=$?
	harness=""
	return "$code"
}

case "${1:-run}" in
install) install ;;
run) check ;;
*) usage ;;
esac
