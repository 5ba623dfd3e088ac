"""An agent that tries to act as its operator: from inside its own session it runs the real `loopwarden`
CLI commands of a plan and reports each one's pid, exit code and output, one JSON line each.

Usage: impostor.py PLAN.json REPORT.jsonl

PLAN: {"mode": "direct" | "setsid" | "daemonised", "commands": [[arg, ...], ...], "keep_env": bool}
- direct: the agent process runs the commands itself.
- setsid: a grandchild that called setsid() runs them (its parent, the agent's child, waits for it).
- daemonised: a double-forked grandchild that called setsid() runs them once its parent has exited
  and it has been re-parented (to the daemon, a child subreaper).
Unless keep_env, LOOPWARDEN_SESSION is removed first, as a hostile agent would. The report ends with
{"done": true}; then the agent sleeps until it is killed (by the operator, not by itself).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time


def run_plan(plan: dict, report: str) -> None:
    env = dict(os.environ)
    if not plan.get("keep_env"):
        env.pop("LOOPWARDEN_SESSION", None)
    me = {"runner": os.getpid(), "ppid": os.getppid(), "pgrp": os.getpgrp(), "sid": os.getsid(0)}
    with open(report, "a", encoding="utf-8") as out:
        out.write(json.dumps({"mode": plan["mode"], **me}) + "\n")
        for args in plan["commands"]:
            proc = subprocess.Popen([sys.executable, "-m", "loopwarden", *args], env=env, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True)
            stdout, stderr = proc.communicate(timeout=60)
            out.write(json.dumps({"args": args, "pid": proc.pid, "code": proc.returncode, "stdout": stdout,
                                  "stderr": stderr}) + "\n")
            out.flush()
        out.write(json.dumps({"done": True}) + "\n")


def main() -> None:
    plan_path, report = sys.argv[1], sys.argv[2]
    with open(plan_path, encoding="utf-8") as f:
        plan = json.load(f)
    mode = plan["mode"]
    if mode == "direct":
        run_plan(plan, report)
    elif mode == "setsid":
        child = os.fork()
        if child == 0:
            grandchild = os.fork()
            if grandchild == 0:
                os.setsid()
                run_plan(plan, report)
                os._exit(0)
            os.waitpid(grandchild, 0)
            os._exit(0)
        os.waitpid(child, 0)
    elif mode == "daemonised":
        child = os.fork()
        if child == 0:
            parent = os.getpid()
            if os.fork() == 0:
                deadline = time.monotonic() + 10
                while os.getppid() == parent and time.monotonic() < deadline:  # until the orphan is re-parented
                    time.sleep(0.01)
                os.setsid()
                run_plan(plan, report)
                time.sleep(3600)  # a daemon lingers; the session's end kills it
                os._exit(0)
            os._exit(0)
        os.waitpid(child, 0)
    print("impostor: plan carried out", flush=True)
    time.sleep(3600)


if __name__ == "__main__":
    main()
