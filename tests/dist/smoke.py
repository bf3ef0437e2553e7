#!/usr/bin/env python3
"""Starts an installed `toolsize` daemon command, times its first /healthz answer, optionally
waits for the demo's alert, stops it with SIGTERM and checks it exits 0.

    smoke.py [--alert NAME] [--admin HOST:PORT] [--timeout S] -- CMD ARG...

Without --admin, three free loopback ports are chosen and `{grpc}`, `{http}` and `{admin}` in
the arguments are replaced by them. Prints one JSON line: the milliseconds from start to the
first 200 of /healthz, the alert seen, the exit code. Exits 1, saying why, on any failure; the
daemon is never left running. Standard library only: it runs where no Rust is installed.
"""

import argparse
import json
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

POLL_S = 0.002


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(url, timeout=1.0):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.status, r.read()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--alert", help="alertname that must fire (read from /api/v1/alerts)")
    p.add_argument("--admin", help="admin address the command listens on")
    p.add_argument("--timeout", type=float, default=30.0)
    p.add_argument("cmd", nargs=argparse.REMAINDER)
    a = p.parse_args()
    cmd = a.cmd[1:] if a.cmd[:1] == ["--"] else a.cmd
    if a.admin:
        admin = a.admin
    else:
        ports = {k: f"127.0.0.1:{free_port()}" for k in ("grpc", "http", "admin")}
        cmd = [c.format(**ports) for c in cmd]
        admin = ports["admin"]
    base = f"http://{admin}"
    started = time.monotonic()
    # The daemon's log goes to a file: a pipe nobody reads would block it once full.
    log = tempfile.TemporaryFile()
    out = tempfile.TemporaryFile()
    proc = subprocess.Popen(cmd, stdout=out, stderr=log)

    def tail():
        log.seek(0)
        return log.read().decode(errors="replace")[-2000:]

    result = {"cmd": cmd[0]}
    try:
        deadline = started + a.timeout
        while True:
            if proc.poll() is not None:
                raise SystemExit(f"exited {proc.returncode} before /healthz answered: {tail()}")
            try:
                status, body = get(base + "/healthz", timeout=0.5)
                if status == 200:
                    result["healthz_ms"] = round((time.monotonic() - started) * 1000, 1)
                    break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise SystemExit(f"no /healthz answer in {a.timeout} s")
            time.sleep(POLL_S)
        if a.alert:
            while True:
                _, body = get(base + "/api/v1/alerts")
                firing = json.loads(body).get("firing", [])
                names = [f["labels"]["alertname"] for f in firing]
                if a.alert in names:
                    result["alert"] = a.alert
                    result["alert_ms"] = round((time.monotonic() - started) * 1000)
                    break
                if time.monotonic() > deadline:
                    raise SystemExit(f"{a.alert} not firing in {a.timeout} s: {names}")
                time.sleep(0.2)
        # The ready line (`{"event":"listening",…}` on stdout) is out too before the stop.
        while True:
            out.seek(0)
            if b'"listening"' in out.read():
                break
            if time.monotonic() > deadline or proc.poll() is not None:
                raise SystemExit(f"no listening line on stdout: {tail()}")
            time.sleep(POLL_S)
        proc.send_signal(signal.SIGTERM)
        result["exit"] = proc.wait(timeout=30)
        if result["exit"] != 0:
            raise SystemExit(f"exit {result['exit']} after SIGTERM: {tail()}")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    print(json.dumps(result))


if __name__ == "__main__":
    try:
        main()
    except SystemExit as e:
        if isinstance(e.code, str):
            print(f"smoke: {e.code}", file=sys.stderr)
            sys.exit(1)
        raise
