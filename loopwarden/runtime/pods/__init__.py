"""Sessions placed on a Kubernetes cluster: one pod per session, its agent held there by loopwarden's keeper,
reached only through the Kubernetes API (placement.py says where, manifest.py what is created, cluster.py the
API, forward.py the link, pod_session.py a session's pod from creation to deletion)."""
