"""A native agent for a pod: it says hello (handshake), then calls `ls .` again and again, waiting for each
verdict, until a stop line or the end of its stdin. Standard library only (the pod's image has no loopwarden).

    python3 pod_looper.py [MARK]

With MARK, it first writes MARK to ./pod-looper.pid with its pid and host name, so a test can find it in the pod.
"""

from __future__ import annotations

import json
import os
import socket
import sys


def main() -> int:
    if len(sys.argv) > 1:
        with open("pod-looper.pid", "w", encoding="utf-8") as out:
            out.write(f"{sys.argv[1]} {os.getpid()} {socket.gethostname()}\n")
    buf = b""

    def verdict() -> dict | None:
        nonlocal buf
        while True:
            while b"\n" not in buf:
                chunk = os.read(0, 65536)
                if not chunk:
                    return None
                buf += chunk
            line, buf = buf.split(b"\n", 1)
            msg = json.loads(line)
            if msg.get("type") == "stop":
                return None
            if msg.get("type") == "verdict":
                return msg

    os.write(1, b'{"type":"hello","name":"pod_looper","protocol":1,"handshake":true}\n')
    n = 0
    while True:
        n += 1
        os.write(1, f'{{"type":"tool_call","tool":"ls","args":{{"path":"."}},"call_id":"c{n}"}}\n'.encode())
        if verdict() is None:
            return 0
        os.write(1, f'{{"type":"tool_result","tool":"ls","call_id":"c{n}","output":"a b c"}}\n'.encode())


if __name__ == "__main__":
    sys.exit(main())
