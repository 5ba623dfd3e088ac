"""Counts to N on stdout, one line at a time; with --echo, answers every stdin line ("got: LINE") until stdin closes.

`counter.py N [--echo] [--stderr]`: deterministic output, so a test can tell a lost or repeated byte."""

import sys

count = int(sys.argv[1])
for i in range(count):
    sys.stdout.write(f"line {i:08d} " + "x" * 40 + "\n")
    if "--stderr" in sys.argv:
        sys.stderr.write(f"err {i}\n")
sys.stdout.flush()
if "--echo" in sys.argv:
    for line in sys.stdin:
        sys.stdout.write(f"got: {line}")
        sys.stdout.flush()
