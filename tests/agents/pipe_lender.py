"""An agent that hands its own stdout and stderr to a process outside its session, then exits.

Usage: pipe_lender.py SOCKET. It connects to the unix socket SOCKET, sends its fds 1 and 2 there
(SCM_RIGHTS), prints one line and exits; the receiver keeps the pipes open, so the supervisor never
sees EOF. Nothing of the session is left to kill: only giving up the drain ends it.
"""

import socket
import sys

with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as lender:
    lender.connect(sys.argv[1])
    socket.send_fds(lender, [b"pipes"], [1, 2])
    lender.recv(1)  # the receiver holds them now
print("lent my pipes", flush=True)
