"""An MCP server over Streamable HTTP that misbehaves on purpose, for the proxy's failure tests.

Usage: misbehave_http.py PORT. `POST /mcp`: every request but `tools/call` is answered at once
with an empty JSON result. A `tools/call` behaves by the tool's name:

  huge        an 8,000,000-byte JSON response
  break       a JSON response announced as 1,000,000 bytes, cut off after 100
  slow        answered after 3 s
  sse_break   an event stream: a comment, then the connection dropped mid-stream (no response)
"""

import json
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def answer(self, body):
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        msg = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        msg_id = msg.get("id")
        if msg_id is None:
            self.send_response(202)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        if msg.get("method") != "tools/call":
            self.answer(json.dumps({"jsonrpc": "2.0", "id": msg_id, "result": {}}).encode())
            return
        name = msg["params"]["name"]
        if name == "huge":
            text = "x" * 8_000_000
            self.answer(json.dumps({"jsonrpc": "2.0", "id": msg_id, "result": {
                "content": [{"type": "text", "text": text}]}}).encode())
        elif name == "break":
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", "1000000")
            self.end_headers()
            self.wfile.write(b'{"jsonrpc":"2.0","id":' + json.dumps(msg_id).encode() + b',"result":{"content":' + b" " * 50)
            self.wfile.flush()
            self.close_connection = True
        elif name == "slow":
            time.sleep(3)
            self.answer(json.dumps({"jsonrpc": "2.0", "id": msg_id, "result": {
                "content": [{"type": "text", "text": "late"}]}}).encode())
        elif name == "sse_break":
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            event = b": working\n\n"
            self.wfile.write(b"%x\r\n%s\r\n" % (len(event), event))
            self.wfile.flush()
            time.sleep(0.2)
            self.close_connection = True


ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
