#!/usr/bin/env bash
# Makes the files of the Secret headroom-tls that deploy/kubernetes's pods
# mount (docs/KUBERNETES.md, "TLS"): ca.crt, the authority agents trust;
# tls.crt and tls.key, the coordinator's certificate for every name agents
# may dial (headroom-coordinator, .NAMESPACE, .NAMESPACE.svc,
# .NAMESPACE.svc.cluster.local) and its key. Then prints the kubectl command
# that makes the Secret from them: kustomize does not, so the key never
# passes through a kustomization, and without the Secret the pods wait
# rather than run in clear. The CA's own key stays out of the repository,
# in CA_DIR, and is made once: run the script again for a new coordinator
# certificate from the same authority.
#
#   ./scripts/kube-certs.sh                       # into deploy/kubernetes/tls (git ignores it)
#   ./scripts/kube-certs.sh DIR                   # into DIR
#   FORCE=1 ./scripts/kube-certs.sh               # replace certificates already there
#
# Environment:
#   NAMESPACE (headroom)   the namespace the run is applied to
#   DAYS (30)              how long the coordinator's certificate is valid
#   CA_DAYS (365)          how long a new CA is valid
#   CA_DIR                 where the CA's key is kept (${XDG_CONFIG_HOME:-~/.config}/headroom/kube-ca)
#
# Needs openssl (1.1.1 or later). Exit codes: 0 made, 1 openssl failed or
# files already there, 2 usage.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${1:-$ROOT/deploy/kubernetes/tls}
NAMESPACE=${NAMESPACE:-headroom}
DAYS=${DAYS:-30}
CA_DAYS=${CA_DAYS:-365}
CA_DIR=${CA_DIR:-${XDG_CONFIG_HOME:-$HOME/.config}/headroom/kube-ca}
SERVICE=headroom-coordinator

die() {
	echo "kube-certs.sh: $*" >&2
	exit 1
}

[[ $# -le 1 && ${1:-} != -* ]] || { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2; }
for v in "DAYS=$DAYS" "CA_DAYS=$CA_DAYS"; do
	[[ ${v#*=} =~ ^[1-9][0-9]*$ ]] || { echo "kube-certs.sh: $v: want a whole number of days" >&2; exit 2; }
done
command -v openssl >/dev/null || die "no openssl on PATH (Debian: apt-get install openssl)"
[[ $# -eq 1 ]] || mkdir -p "$OUT" # the default; a DIR named must be there
[[ -d $OUT ]] || die "$OUT is not a directory"
if [[ ${FORCE:-0} != 1 ]]; then
	for f in ca.crt tls.crt tls.key; do
		[[ ! -e $OUT/$f ]] || die "$OUT/$f is already there: FORCE=1 replaces the certificates"
	done
fi

umask 077
mkdir -p "$CA_DIR"
if [[ ! -f $CA_DIR/ca.key || ! -f $CA_DIR/ca.crt ]]; then
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days "$CA_DAYS" \
		-subj /CN=headroom-agents-ca -keyout "$CA_DIR/ca.key" -out "$CA_DIR/ca.crt" 2>/dev/null ||
		die "openssl could not make the CA"
	echo "a new CA: $CA_DIR/ca.crt (its key beside it, never in the repository)"
fi
openssl x509 -in "$CA_DIR/ca.crt" -noout -checkend $((DAYS * 86400)) >/dev/null ||
	die "the CA in $CA_DIR expires within $DAYS days: move that directory away for a new CA (and apply its ca.crt)"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
sans="DNS:$SERVICE,DNS:$SERVICE.$NAMESPACE,DNS:$SERVICE.$NAMESPACE.svc,DNS:$SERVICE.$NAMESPACE.svc.cluster.local"
printf 'subjectAltName=%s\nextendedKeyUsage=serverAuth\nkeyUsage=critical,digitalSignature\n' "$sans" >"$work/ext"
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=$SERVICE" \
	-keyout "$work/tls.key" -out "$work/tls.csr" 2>/dev/null || die "openssl could not make the coordinator's key"
openssl x509 -req -in "$work/tls.csr" -CA "$CA_DIR/ca.crt" -CAkey "$CA_DIR/ca.key" \
	-set_serial "0x$(openssl rand -hex 8)" -days "$DAYS" -out "$work/tls.crt" -extfile "$work/ext" 2>/dev/null ||
	die "openssl could not sign the coordinator's certificate"
openssl verify -CAfile "$CA_DIR/ca.crt" "$work/tls.crt" >/dev/null || die "the certificate made does not verify"
install -m 0644 "$CA_DIR/ca.crt" "$OUT/ca.crt"
install -m 0644 "$work/tls.crt" "$OUT/tls.crt"
install -m 0600 "$work/tls.key" "$OUT/tls.key"
echo "wrote $OUT/ca.crt, tls.crt (for ${sans//DNS:/}, $DAYS days) and tls.key"
echo "the Secret the pods mount, once the namespace is there (kubectl apply -f deploy/kubernetes/namespace.yaml):"
echo "  kubectl -n $NAMESPACE create secret generic headroom-tls --from-file=ca.crt=$OUT/ca.crt --from-file=tls.crt=$OUT/tls.crt --from-file=tls.key=$OUT/tls.key"
