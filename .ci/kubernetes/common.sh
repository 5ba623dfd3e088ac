# shellcheck shell=bash
# What prepare.sh, up.sh and down.sh share: the layout of a cluster folder ROOT, and small helpers. Sourced, not run.
#
# ROOT/bin      kube-apiserver, kube-controller-manager, kube-scheduler, kubelet (built once; reused when present)
# ROOT/src      Debian's kubernetes source tree;  ROOT/gopath, ROOT/gocache: the Go build's
# ROOT/img      pause.tar and workload.tar (docker-archives for `ctr images import`)
# ROOT/pki      CA, serving certificate, service-account key, static tokens, admin and node kubeconfigs (0700)
# ROOT/operator.kubeconfig   a user with a token and no groups: what RBAC grants it is all it may do
# ROOT/run      the daemons' state (etcd data, containerd root, kubelet root, CNI config) and `pids`
# ROOT/logs     every step's and every daemon's log
# ROOT/ready    written last by prepare.sh: the admin kubeconfig's path;  ROOT/unavailable: why not, in one line

[ "$#" -ge 1 ] && [ -n "$1" ] || { echo "usage: $0 ROOT  (the cluster's folder, e.g. \$PWD/.cluster)" >&2; exit 2; }
ROOT=$(realpath -m -- "$1")
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
BIN=$ROOT/bin PKI=$ROOT/pki RUN=$ROOT/run LOGS=$ROOT/logs IMG=$ROOT/img
ADMIN_KUBECONFIG=$PKI/admin.kubeconfig
NODE=node1                                # the kubelet's name, reached on loopback through /etc/hosts
APISERVER=https://127.0.0.1:6443
WORKLOAD_IMAGE=localhost/loopwarden-test:1
PAUSE_IMAGE=k8s.gcr.io/pause:3.2          # the name the kubelet of 1.20 asks for; built locally, never pulled
CONTAINERD_SOCK=$RUN/containerd.sock
CNI_BRIDGE=lwtest0 CNI_NETWORK=loopwarden-test
HOSTS_LINE="127.0.0.1 $NODE"
SYSCTLS=(vm.overcommit_memory kernel.panic kernel.panic_on_oops)   # the kubelet sets these at start

say() { echo "[$(date +%H:%M:%S)] $*"; }

# The API as the admin: `api METHOD PATH [curl args...]` prints the body; fails on an HTTP error.
api() {
  local method=$1 path=$2; shift 2
  curl -fsS --max-time 10 --cacert "$PKI/ca.crt" -H "Authorization: Bearer $(cat "$PKI/admin.token")" \
    -X "$method" "$@" "$APISERVER$path"
}

# Poll `condition` (a shell command) every half second until it holds; fail after `seconds`.
wait_until() {
  local what=$1 seconds=$2 condition=$3 deadline=$((SECONDS + $2))
  until eval "$condition" >/dev/null 2>&1; do
    if [ "$SECONDS" -ge "$deadline" ]; then say "$what: not after ${seconds}s"; return 1; fi
    sleep 0.5
  done
  say "$what"
}

# The PID recorded for a daemon, only while that process still runs that program (a PID may be reused).
live_pid() {
  local name=$1 pid
  pid=$(awk -v n="$name" '$1 == n {print $2}' "$RUN/pids" 2>/dev/null | tail -n1)
  [ -n "$pid" ] && [ -r "/proc/$pid/cmdline" ] && tr '\0' ' ' < "/proc/$pid/cmdline" | grep -q -- "$name" && echo "$pid"
}
