#!/usr/bin/env bash
# Build and start a real one-node Kubernetes 1.20.2 cluster in ROOT, offline, from Debian packages only; then write
# ROOT/ready (the admin kubeconfig's path), or ROOT/unavailable with one line saying why not (which step failed
# and where its log is). Every step logs to ROOT/logs/; this script's own outline goes to stdout.
#
# usage: prepare.sh ROOT           (as root, on Debian 12 or 13, with apt reaching a Debian mirror)
#   LOOPWARDEN_K8S_SKIP_UP=1       build everything but start nothing (no ready file then: ROOT/built instead)
#
# Steps, each skipped when its result is already in ROOT (so a second run, or a ROOT/bin copied from another
# build, costs seconds): apt packages; Debian's bookworm `kubernetes` source (the only Debian source with the
# server components and every dependency vendored), with its reflect2 swapped for Debian's 1.0.2 (1.0.1
# misbehaves under Go >= 1.18); OpenAPI generated; kube-apiserver, kube-controller-manager, kube-scheduler and
# kubelet built in GOPATH mode (about 5 minutes on 2 cores, 1.5 GB of Go cache); the pause image (gcc -static
# from the same tree) and the workload image (mmdebstrap minbase + python3); certificates, tokens, kubeconfigs;
# then up.sh.
#
# Caveats: Kubernetes 1.20 is old (no batch/v1 CronJob); the machine's apt sources get a bookworm deb-src entry
# for as long as the source download takes; about 3.5 GB of disk in ROOT; needs root (containerd, runc, the
# kubelet's cgroups, /etc/hosts). The cluster is for tests only: static tokens, an anonymous kubelet API bound
# to loopback, pods without a route out.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
mkdir -p "$LOGS"
SRC_LIST=/etc/apt/sources.list.d/loopwarden-kubernetes-src.sources
PACKAGES=(etcd-server etcd-client containerd runc containernetworking-plugins mmdebstrap dpkg-dev gcc golang-go
          golang-github-modern-go-reflect2-dev jq rsync iptables conntrack curl openssl make ca-certificates)
# kubectl, for the README's `kubectl apply` (tests/cli/test_readme.py runs it): Debian's own 1.20 client, unless one
# is on the machine already (another package owning /usr/bin/kubectl would conflict with it)
command -v kubectl >/dev/null || PACKAGES+=(kubernetes-client)
COMPONENTS=(kube-apiserver kube-controller-manager kube-scheduler kubelet)
rm -f "$ROOT/ready" "$ROOT/unavailable" "$ROOT/built"

unavailable() {
  echo "$1" > "$ROOT/unavailable.partial" && mv "$ROOT/unavailable.partial" "$ROOT/unavailable"
  say "unavailable: $1"
  exit 1
}
# However this script ends, a waiting test must learn it: no ready file means an unavailable one.
finish() {
  local code=$?
  rm -f "$SRC_LIST"
  if [ "$code" -ne 0 ] && [ ! -e "$ROOT/ready" ] && [ ! -e "$ROOT/unavailable" ]; then
    echo "prepare.sh stopped (exit $code); see $LOGS/" > "$ROOT/unavailable"
  fi
}
trap finish EXIT

# `step NAME COMMAND...`: run a step with its output in ROOT/logs/NAME.log; a failure names the step and its log.
# The step runs as a background job then awaited: beside `||` bash would ignore `set -e` inside it.
step() {
  local name=$1 started=$SECONDS; shift
  say "$name"
  ("$@") > "$LOGS/$name.log" 2>&1 &
  wait $! || unavailable "step '$name' failed; log: $LOGS/$name.log"
  say "$name done in $((SECONDS - started))s"
}

[ "$(id -u)" -eq 0 ] || unavailable "needs root (containerd, runc and the kubelet's cgroups); run as root"
command -v apt-get >/dev/null || unavailable "needs a Debian machine with apt-get"
mkdir -p "$BIN" "$IMG" "$RUN"

install_packages() {
  local missing=() p
  for p in "${PACKAGES[@]}"; do dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || missing+=("$p"); done
  [ "${#missing[@]}" -eq 0 ] && { echo "all installed"; return 0; }
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends -o DPkg::Lock::Timeout=600 "${missing[@]}"
}

# The mirror the machine's own Debian entry names (a Debian 13 machine's too: the suite is pinned, not the mirror).
debian_mirror() {
  local uri
  uri=$(grep -hE '^(URIs:|deb )' /etc/apt/sources.list.d/*.sources /etc/apt/sources.list 2>/dev/null \
        | grep -oE 'https?://[^ ]+/debian/?( |$)' | head -n1 | tr -d ' ') || true
  echo "${uri:-http://deb.debian.org/debian}"
}

fetch_source() {
  ls -d "$ROOT"/src/kubernetes-*/ >/dev/null 2>&1 && { echo "already fetched"; return 0; }
  printf 'Types: deb-src\nURIs: %s\nSuites: bookworm\nComponents: main\nSigned-By: %s\n' \
    "$(debian_mirror)" /usr/share/keyrings/debian-archive-keyring.gpg > "$SRC_LIST"
  apt-get update -qq
  rm -rf "$ROOT/src.partial" && mkdir -p "$ROOT/src.partial"
  (cd "$ROOT/src.partial" && apt-get source -qq kubernetes/bookworm)
  rm -f "$SRC_LIST"
  rm -rf "$ROOT/src" && mv "$ROOT/src.partial" "$ROOT/src"
}

swap_reflect2() {
  local vendored=$TREE/vendor/github.com/modern-go/reflect2 debian=/usr/share/gocode/src/github.com/modern-go/reflect2
  [ -e "$vendored/.debian" ] && { echo "already swapped"; return 0; }
  rm -f "$vendored"/*.go "$vendored"/*.s
  cp "$debian"/*.go "$debian"/*.s "$vendored"/
  rm -f "$vendored"/*_test.go
  touch "$vendored/.debian"
}

# Kubernetes 1.20 builds in GOPATH mode (modules mode fails on its vendor tree), as Debian's own rules do.
go_env() {
  export GOPATH=$ROOT/gopath GOCACHE=$ROOT/gocache GO111MODULE=off CGO_ENABLED=0 GOFLAGS= GOTOOLCHAIN=local
  mkdir -p "$GOPATH/src/k8s.io" && ln -sfn "$TREE" "$GOPATH/src/k8s.io/kubernetes"
}

generate_openapi() {
  [ -s "$TREE/pkg/generated/openapi/zz_generated.openapi.go" ] && { echo "already generated"; return 0; }
  go_env
  make -C "$GOPATH/src/k8s.io/kubernetes" gen_openapi
}

build_components() {
  local missing=() c
  for c in "${COMPONENTS[@]}"; do [ -x "$BIN/$c" ] || missing+=("./cmd/$c"); done
  [ "${#missing[@]}" -eq 0 ] && { echo "all built"; return 0; }
  go_env
  go version
  # Without the version stamped in both places, /version says v0.0.0-master.
  local flags="-s -w" pkg
  for pkg in component-base/version client-go/pkg/version; do
    local v=k8s.io/kubernetes/vendor/k8s.io/$pkg
    flags+=" -X $v.gitVersion=v1.20.2 -X $v.gitMajor=1 -X $v.gitMinor=20 -X $v.gitTreeState=clean"
    flags+=" -X $v.gitCommit=faecb196815e248d3ecfb03c680a4507229c2a56 -X $v.buildDate=2021-01-13T00:00:00Z"
  done
  cd "$GOPATH/src/k8s.io/kubernetes"
  go build -tags selinux,notest -ldflags "$flags" -o "$BIN/" "${missing[@]}"
  ls -la "$BIN"
}

pause_image() {
  [ -s "$IMG/pause.tar" ] && { echo "already made"; return 0; }
  rm -rf "$IMG/pause" && mkdir -p "$IMG/pause"
  gcc -Os -static -o "$IMG/pause/pause" "$TREE/build/pause/linux/pause.c"
  strip "$IMG/pause/pause"
  python3 "$HERE/mkimage.py" "$IMG/pause" "$PAUSE_IMAGE" "$IMG/pause.tar" /pause
  rm -rf "$IMG/pause"
}

# python3 in full: loopwarden's keeper runs in the pod and needs json, selectors, ctypes, argparse...
workload_image() {
  [ -s "$IMG/workload.tar" ] && { echo "already made"; return 0; }
  rm -rf "$IMG/workload"
  mmdebstrap --variant=minbase --include=python3 --format=directory bookworm "$IMG/workload" "$(debian_mirror)"
  python3 "$HERE/mkimage.py" "$IMG/workload" "$WORKLOAD_IMAGE" "$IMG/workload.tar"
  rm -rf "$IMG/workload"
}

token() { head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n'; }

kubeconfig() {  # kubeconfig FILE TOKEN
  (umask 077 && cat > "$1" <<EOF
apiVersion: v1
kind: Config
clusters: [{name: loopwarden-test, cluster: {server: "$APISERVER", certificate-authority: "$PKI/ca.crt"}}]
users: [{name: user, user: {token: "$2"}}]
contexts: [{name: loopwarden-test, context: {cluster: loopwarden-test, user: user, namespace: default}}]
current-context: loopwarden-test
EOF
  )
}

credentials() {
  [ -s "$PKI/tokens.csv" ] && [ -s "$ROOT/operator.kubeconfig" ] && { echo "already written"; return 0; }
  rm -rf "$PKI" && mkdir -m 700 "$PKI" && cd "$PKI"
  umask 077
  openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -subj /CN=loopwarden-test-ca -days 365 -out ca.crt
  openssl req -newkey rsa:2048 -nodes -keyout apiserver.key -subj /CN=kube-apiserver -out apiserver.csr
  printf 'subjectAltName=IP:127.0.0.1,IP:10.96.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default\nextendedKeyUsage=serverAuth\n' > ext.cnf
  openssl x509 -req -in apiserver.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 365 -extfile ext.cnf -out apiserver.crt
  openssl genrsa -out sa.key 2048
  openssl rsa -in sa.key -pubout -out sa.pub
  local admin node operator
  admin=$(token) node=$(token) operator=$(token)
  echo "$admin" > admin.token
  # token,user,uid[,"groups"]: the operator has no group at all, so only RBAC bindings to its name count.
  printf '%s,admin,admin,system:masters\n%s,system:node:%s,%s,system:nodes\n%s,loopwarden-operator,loopwarden-operator\n' \
    "$admin" "$node" "$NODE" "$NODE" "$operator" > tokens.csv
  kubeconfig admin.kubeconfig "$admin"
  kubeconfig node.kubeconfig "$node"
  kubeconfig "$ROOT/operator.kubeconfig" "$operator"
}

step packages install_packages
step source fetch_source
TREE=$(ls -d "$ROOT"/src/kubernetes-*/ | head -n1)
TREE=${TREE%/}
step reflect2 swap_reflect2
step openapi generate_openapi
step build build_components
step pause-image pause_image
step workload-image workload_image
step credentials credentials
if [ "${LOOPWARDEN_K8S_SKIP_UP:-}" = 1 ]; then
  date > "$ROOT/built"
  say "built; not started (LOOPWARDEN_K8S_SKIP_UP=1)"
  exit 0
fi
step up "$HERE/up.sh" "$ROOT"
echo "$ADMIN_KUBECONFIG" > "$ROOT/ready.partial" && mv "$ROOT/ready.partial" "$ROOT/ready"
say "ready: $ADMIN_KUBECONFIG"
