#!/usr/bin/env bash
# Start the one-node cluster prepare.sh built in ROOT, all on loopback: etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler, containerd (with runc) and the kubelet as node `node1`; load the pause
# and workload images; return once the node is Ready and the default ServiceAccount exists. Each daemon's PID
# goes to ROOT/run/pids (down.sh stops them by it), its log to ROOT/logs/NAME.log.
#
# usage: up.sh ROOT     (as root; safe to run twice: a daemon still running from its recorded PID is kept)
#
# Caveats, each a workaround for this kind of machine:
# - containerd's CRI has `restrict_oom_score_adj = true`: a negative oom_score_adj is denied here, and without it
#   every sandbox fails with "can't get final child's PID from pipe" (Guaranteed pods get 0 instead of -997).
# - The kubelet refuses a loopback --node-ip, so it binds 127.0.0.1 and the apiserver reaches it by hostname:
#   `127.0.0.1 node1` is added to /etc/hosts (down.sh takes it out again if this script added it).
# - The kubelet sets vm.overcommit_memory, kernel.panic and kernel.panic_on_oops; their values are saved first
#   for down.sh to restore.
# - Pods get a bridge (lwtest0, 10.89.0.0/16) with no route out; no kube-proxy, no DNS. A pod that must reach
#   the API uses hostNetwork.
# - The kubelet neither collects images nor evicts pods. It measures a disk as used = size - available, and this
#   machine's disk reads 85% used even with tens of GB free, so its image collection deleted the workload image
#   (which no registry can give back) and later pods waited on ErrImageNeverPull. The disk and memory are the test
#   run's: a full disk must fail its own tests, not evict the cluster's pods.
# - The kubelet's API is anonymous with AlwaysAllow, and the users are static tokens: a test cluster only.
# - Needs the ports 2379, 2380, 6443, 10250, 10257 and 10259 free: one such cluster per machine.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
mkdir -p "$LOGS"
for f in "$BIN/kube-apiserver" "$BIN/kubelet" "$PKI/tokens.csv" "$IMG/pause.tar" "$IMG/workload.tar"; do
  [ -e "$f" ] || { echo "up.sh: $f is missing: run prepare.sh $ROOT first" >&2; exit 1; }
done
[ "$(id -u)" -eq 0 ] || { echo "up.sh: needs root" >&2; exit 1; }
mkdir -p "$RUN/cni/net.d" && touch "$RUN/pids"
NICENESS=$(nice)   # prepare.sh runs niced; the daemons must not be, or a busy test run starves the cluster

port_taken() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# `start NAME PORT COMMAND...`: start a daemon unless its recorded PID still runs it; refuse a port someone else holds.
start() {
  local name=$1 port=$2; shift 2
  if [ -n "$(live_pid "$name" || true)" ]; then say "$name already running"; return 0; fi
  if [ "$port" != - ] && port_taken "$port"; then
    echo "up.sh: port $port, which $name needs, is taken (another cluster on this machine?)" >&2
    return 1
  fi
  nohup nice -n "$((-NICENESS))" "$@" > "$LOGS/$name.log" 2>&1 &
  echo "$name $!" >> "$RUN/pids"
  say "$name started (pid $!)"
}

remember_machine_state() {
  if [ ! -e "$RUN/sysctl.saved" ]; then
    local s
    for s in "${SYSCTLS[@]}"; do echo "$s=$(sysctl -n "$s")"; done > "$RUN/sysctl.saved"
  fi
  if [ "$(getent hosts "$NODE" | awk '{print $1}')" != 127.0.0.1 ]; then
    [ -z "$(tail -c1 /etc/hosts)" ] || echo >> /etc/hosts
    echo "$HOSTS_LINE" >> /etc/hosts
    touch "$RUN/hosts.added"
  fi
}

write_containerd_config() {
  cat > "$RUN/containerd.toml" <<EOF
version = 2
root = "$RUN/containerd-root"
state = "$RUN/containerd-state"
[grpc]
  address = "$CONTAINERD_SOCK"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$RUN/cni/net.d"
  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
    runtime_type = "io.containerd.runc.v2"
EOF
  cat > "$RUN/cni/net.d/10-$CNI_NETWORK.conflist" <<EOF
{"cniVersion": "0.4.0", "name": "$CNI_NETWORK", "plugins": [{"type": "bridge", "bridge": "$CNI_BRIDGE",
 "isGateway": true, "ipMasq": false, "ipam": {"type": "host-local", "ranges": [[{"subnet": "10.89.0.0/16"}]]}}]}
EOF
}

write_kubelet_config() {
  cat > "$RUN/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: 127.0.0.1
cgroupDriver: cgroupfs
failSwapOn: false
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
authentication: {anonymous: {enabled: true}, webhook: {enabled: false}, x509: {clientCAFile: "$PKI/ca.crt"}}
authorization: {mode: AlwaysAllow}
clusterDomain: cluster.local
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: "0%", nodefs.available: "0%", nodefs.inodesFree: "0%", imagefs.available: "0%"}
EOF
}

node_ready() {
  api GET "/api/v1/nodes/$NODE" | jq -e '.status.conditions[] | select(.type == "Ready") | .status == "True"'
}

remember_machine_state
write_containerd_config
write_kubelet_config

start etcd 2379 etcd --name node1 --data-dir "$RUN/etcd" \
  --listen-client-urls http://127.0.0.1:2379 --advertise-client-urls http://127.0.0.1:2379 \
  --listen-peer-urls http://127.0.0.1:2380 --initial-advertise-peer-urls http://127.0.0.1:2380 \
  --initial-cluster node1=http://127.0.0.1:2380 --listen-metrics-urls=
start containerd - containerd --config "$RUN/containerd.toml"
wait_until "etcd healthy" 60 "etcdctl --endpoints=http://127.0.0.1:2379 endpoint health"

start kube-apiserver 6443 "$BIN/kube-apiserver" --etcd-servers=http://127.0.0.1:2379 \
  --bind-address=127.0.0.1 --advertise-address=127.0.0.1 --secure-port=6443 \
  --tls-cert-file="$PKI/apiserver.crt" --tls-private-key-file="$PKI/apiserver.key" --client-ca-file="$PKI/ca.crt" \
  --token-auth-file="$PKI/tokens.csv" --authorization-mode=Node,RBAC \
  --service-account-key-file="$PKI/sa.pub" --service-account-signing-key-file="$PKI/sa.key" \
  --service-account-issuer=https://kubernetes.default.svc.cluster.local --service-cluster-ip-range=10.96.0.0/24 \
  --kubelet-preferred-address-types=Hostname --allow-privileged=true --cert-dir="$RUN/apiserver"
wait_until "kube-apiserver ready" 240 "api GET /readyz"

start kube-controller-manager 10257 "$BIN/kube-controller-manager" --kubeconfig="$ADMIN_KUBECONFIG" \
  --service-account-private-key-file="$PKI/sa.key" --root-ca-file="$PKI/ca.crt" \
  --leader-elect=false --bind-address=127.0.0.1 --port=0 --cert-dir="$RUN/controller-manager"
start kube-scheduler 10259 "$BIN/kube-scheduler" --kubeconfig="$ADMIN_KUBECONFIG" --leader-elect=false \
  --bind-address=127.0.0.1 --port=0 --cert-dir="$RUN/scheduler"

wait_until "containerd answering" 60 "ctr --address '$CONTAINERD_SOCK' version"
for image in "$IMG/pause.tar" "$IMG/workload.tar"; do
  ctr --address "$CONTAINERD_SOCK" -n k8s.io images import "$image" > /dev/null
  say "imported $image"
done

start kubelet 10250 "$BIN/kubelet" --kubeconfig="$PKI/node.kubeconfig" --config="$RUN/kubelet.yaml" \
  --container-runtime=remote --container-runtime-endpoint="unix://$CONTAINERD_SOCK" \
  --hostname-override="$NODE" --root-dir="$RUN/kubelet" --v=1
wait_until "node $NODE Ready" 240 node_ready
wait_until "default ServiceAccount" 120 "api GET /api/v1/namespaces/default/serviceaccounts/default"
