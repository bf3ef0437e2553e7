"""An MCP server on stdio that misbehaves on purpose, for the proxy's failure tests.

Usage: misbehave.py MODE [ARG]. Every request but `tools/call` is answered at once with an
empty result (`ping` with the methods received so far, as `{"seen": [...]}`). A `tools/call`:

  huge N        answered with a result line of N bytes, `id` first, written in 1 MiB pieces
  huge-id-last N  the same with `id` after the result
  die           half a response written, then exit 3 (the second call in flight triggers it)
  exit          exit 5 without answering (the second call in flight triggers it)
  silent        never answered
  late SECONDS  answered after SECONDS
"""

import json
import sys
import threading
import time

MODE = sys.argv[1]
ARG = sys.argv[2] if len(sys.argv) > 2 else None
out = sys.stdout.buffer
lock = threading.Lock()
seen = []
calls = []


def write(data):
    with lock:
        out.write(data)
        out.flush()


def answer(msg_id, result):
    write(json.dumps({"jsonrpc": "2.0", "id": msg_id, "result": result}).encode() + b"\n")


def huge(msg_id, size, id_last):
    head = b'{"jsonrpc":"2.0",' + (b"" if id_last else b'"id":' + json.dumps(msg_id).encode() + b",")
    head += b'"result":{"content":[{"type":"text","text":"'
    tail = b'"}]}' + ((b',"id":' + json.dumps(msg_id).encode()) if id_last else b"") + b"}\n"
    fill = size - len(head) - len(tail)
    chunk = b"x" * (1 << 20)
    with lock:
        out.write(head)
        while fill > 0:
            n = min(fill, len(chunk))
            out.write(chunk[:n])
            fill -= n
        out.write(tail)
        out.flush()


for raw in sys.stdin.buffer:
    msg = json.loads(raw)
    method = msg.get("method")
    seen.append(method)
    if "id" not in msg:
        continue
    msg_id = msg["id"]
    if method == "ping":
        answer(msg_id, {"seen": seen})
    elif method != "tools/call":
        answer(msg_id, {})
    elif MODE in ("huge", "huge-id-last"):
        huge(msg_id, int(ARG), MODE == "huge-id-last")
    elif MODE in ("die", "exit"):
        calls.append(msg_id)
        if len(calls) == 2:
            if MODE == "die":
                write(b'{"jsonrpc":"2.0","id":' + json.dumps(msg_id).encode() + b',"result":{"content":[{"type":"te')
                sys.exit(3)
            sys.exit(5)
    elif MODE == "silent":
        pass
    elif MODE == "late":
        delay = float(ARG)
        threading.Timer(
            delay,
            answer,
            (msg_id, {"content": [{"type": "text", "text": "late"}]}),
        ).start()
