#!/usr/bin/env bash
# Stop the cluster up.sh started in ROOT and put the machine back as it was: the controllers first (so nothing is
# recreated), then every pod deleted through the API (the kubelet tears down their sandboxes and networks), then
# the daemons by their recorded PIDs, then whatever a crash may have left: our containerd's shims and their
# containers, mounts under ROOT/run, the pod bridge and its address records, the kubepods cgroups; the
# /etc/hosts line and the kernel settings up.sh saved are restored. ROOT's build (bin, images, pki) is kept.
#
# usage: down.sh ROOT     (as root; safe to run twice, and on a cluster that never came up)
#
# Caveat: the kubepods cgroups and the cni-* network namespaces are the machine's, not ROOT's: they are only
# cleaned when no other kubelet or containerd runs here.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
rm -f "$ROOT/ready"
touch "$RUN/pids" 2>/dev/null || { say "nothing to stop in $ROOT"; exit 0; }

# `stop NAME`: TERM by recorded PID, KILL after ten seconds.
stop() {
  local name=$1 pid
  pid=$(live_pid "$name") || { return 0; }
  kill "$pid" 2>/dev/null || true
  for _ in $(seq 1 20); do kill -0 "$pid" 2>/dev/null || { say "stopped $name ($pid)"; return 0; }; sleep 0.5; done
  kill -9 "$pid" 2>/dev/null || true
  say "killed $name ($pid)"
}

running_tasks() { ctr --address "$CONTAINERD_SOCK" -n k8s.io tasks ls -q 2>/dev/null | wc -l; }

delete_pods() {
  local ns
  for ns in $(api GET /api/v1/namespaces | jq -r '.items[].metadata.name'); do
    api DELETE "/api/v1/namespaces/$ns/pods?gracePeriodSeconds=1" > /dev/null || true
  done
  wait_until "no pods left" 60 "[ \"\$(api GET /api/v1/pods | jq '.items | length')\" = 0 ]" || true
  wait_until "no containers left" 30 "[ \"\$(running_tasks)\" = 0 ]" || true
}

# Shims whose command line names our containerd's socket, and the containers under them. (Their process name,
# cut to 15 characters, is "containerd-shim": too short for pgrep to tell runc's v2 shim from others.)
stop_shims() {
  local process shim child
  for process in /proc/[0-9]*; do
    [ "$(cat "$process/comm" 2>/dev/null)" = containerd-shim ] || continue
    tr '\0' ' ' < "$process/cmdline" 2>/dev/null | grep -qF -- "$CONTAINERD_SOCK" || continue
    shim=${process#/proc/}
    for child in $(pgrep -P "$shim" || true); do kill -9 "$child" 2>/dev/null || true; done
    kill -9 "$shim" 2>/dev/null && say "killed shim $shim" || true
  done
}

unmount_all() {
  local mount
  awk -v run="$RUN/" 'index($2, run) == 1 {print $2}' /proc/mounts | sort -r | while read -r mount; do
    umount "$mount" 2>/dev/null || umount -l "$mount" || true
  done
  if ! pgrep -x containerd > /dev/null; then
    awk 'index($2, "/run/netns/cni-") == 1 {print $2}' /proc/mounts | while read -r mount; do
      umount "$mount" && rm -f "$mount" || true
    done
  fi
}

remove_cgroups() {
  pgrep -x kubelet > /dev/null && { say "another kubelet runs here: kubepods cgroups left to it"; return 0; }
  local hierarchy
  for hierarchy in /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/kubepods; do
    [ -d "$hierarchy" ] && find "$hierarchy" -depth -type d -exec rmdir {} \; 2>/dev/null || true
  done
}

restore_machine() {
  ip link del "$CNI_BRIDGE" 2>/dev/null && say "removed bridge $CNI_BRIDGE" || true
  rm -rf "/var/lib/cni/networks/$CNI_NETWORK" "$RUN/cni"
  if [ -e "$RUN/hosts.added" ]; then
    # Rewritten in place, not renamed over: /etc/hosts is often a bind mount.
    grep -vxF "$HOSTS_LINE" /etc/hosts > "$RUN/hosts.new" || true
    cat "$RUN/hosts.new" > /etc/hosts && rm -f "$RUN/hosts.new" "$RUN/hosts.added"
    say "removed '$HOSTS_LINE' from /etc/hosts"
  fi
  if [ -e "$RUN/sysctl.saved" ]; then
    say "restoring $(tr '\n' ' ' < "$RUN/sysctl.saved")"
    xargs sysctl -qw < "$RUN/sysctl.saved" && rm -f "$RUN/sysctl.saved"
  fi
}

stop kube-controller-manager
stop kube-scheduler
if [ -n "$(live_pid kube-apiserver || true)" ] && [ -n "$(live_pid kubelet || true)" ]; then delete_pods; fi
for daemon in kubelet kube-apiserver containerd etcd; do stop "$daemon"; done
stop_shims
unmount_all
remove_cgroups
restore_machine
: > "$RUN/pids"
say "down"
