#!/usr/bin/env python3
"""fake_model.py - one scripted fake LLM server for three vendor APIs (stdlib only).

Speaks just enough of
  * the Anthropic Messages API   POST /v1/messages (SSE or JSON), /v1/messages/count_tokens
  * the OpenAI Responses API     POST /v1/responses (SSE)
  * OpenAI Chat Completions      POST /v1/chat/completions (SSE or JSON; Qwen Code, opencode)
  * the Gemini API               POST /v1beta/models/{model}:streamGenerateContent?alt=sse
                                 POST /v1beta/models/{model}:generateContent, :countTokens
to drive Claude Code, Codex, Gemini CLI, Qwen Code and opencode through the same scripted
session.
Any path prefix before /v1/... or /v1beta/... is accepted.

The script (one tool call per model turn, in this order):
  step 0  label "seq"      shell  `seq 1 20000`            (108,894 bytes of stdout;
                                                            --seq-count N: `seq 1 N`)
  step 1  label "echo"     shell  `echo small`
  step 2  label "cat_fail" shell  `cat /nonexistent`       (fails)
  step 3  label "read"     read   --read-file PATH          (read tool if the agent has one,
                                                            else shell `cat PATH`)
  step 4  final text answer
With --batch N (Anthropic only), the script is instead N calls of `seq 1 5000` (23,893 bytes
each, labels "batch0"...), all in the first assistant message, then the final answer: what
Claude Code does with the results of one message when together they pass its budget.
The step of a main-loop request is the number of *scripted* tool results already in
its history, so the server is stateless per request and tolerates retries.
Requests that carry no shell tool (titles, summaries, next-speaker checks, ...) are
"side requests" and get a short text (or minimal schema-conforming JSON) answer.

Every tool result that comes back is recorded ONCE (first time seen) as a JSON line
in --records:
  {"api", "step", "label", "command", "tool_call_id", "tool_name",
   "is_error" (protocol-level flag: Anthropic is_error / Gemini "error" key /
               null for the Responses API, which has no such flag),
   "text" (what the model got, concatenated text parts),
   "utf8_bytes", "chars" (code points), "utf16_units",
   "parts" (list of text parts, Anthropic/OpenAI), "raw" (the wire object),
   "wire_json_utf8_bytes" (json.dumps(raw, ensure_ascii=False) size), "request_seq", "ts"}
Every HTTP request is also logged (with its full JSON body) to --request-log if given.

Token usage: each Anthropic Messages, OpenAI Responses and Gemini answer reports request bytes / 4
uncached input tokens and the cache counts the run asks for (`--cache-read N`: N tokens read from
the cache on every main request after the first; `--cache-creation N`: N written on every main
request, Anthropic only: the Responses and Gemini APIs report no cache writes). As each API does,
the Responses API's `input_tokens` and Gemini's `promptTokenCount` include the cached tokens
(`input_tokens_details.cached_tokens`, `cachedContentTokenCount`). With --usage-log, one JSON line
per request of those APIs says what was reported (`input_tokens` uncached):
  {"request_seq", "side", "input_tokens", "cache_read_input_tokens",
   "cache_creation_input_tokens"}

Usage:
  python3 fake_model.py --port 0 --port-file P --records rec.jsonl --read-file /abs/file \
      [--request-log req.jsonl] [--gemini-call-ids]
"""
import argparse
import gzip
import json
import os
import re
import signal
import sys
import threading
import time
import uuid
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

FINAL_TEXT = "All four tool calls are done. Final answer: ok."


def utf16_len(s):
    return len(s.encode("utf-16-le")) // 2


def script_steps(read_file, seq_count=20000):
    return [
        {"label": "seq", "kind": "shell", "command": "seq 1 %d" % seq_count},
        {"label": "echo", "kind": "shell", "command": "echo small"},
        {"label": "cat_fail", "kind": "shell", "command": "cat /nonexistent"},
        {"label": "read", "kind": "read", "path": read_file, "command": "cat " + read_file},
    ]


# ----------------------------------------------------------------------------- state
class State:
    def __init__(self, a):
        self.a = a
        self.steps = script_steps(a.read_file, a.seq_count)
        if a.batch:
            self.steps = [{"label": "batch%d" % i, "kind": "shell", "command": "seq 1 5000"}
                          for i in range(a.batch)]
        self.lock = threading.Lock()
        self.req_seq = 0
        self.recorded = set()          # (api, tool_call_id or positional key)
        self.issued = {}               # tool_call_id -> step index
        self.rec_f = open(a.records, "a", encoding="utf-8")
        self.log_f = open(a.request_log, "a", encoding="utf-8") if a.request_log else None
        self.usage_f = open(a.usage_log, "a", encoding="utf-8") if a.usage_log else None
        self.main_requests = 0

    def usage(self, req_seq, side, body_len, cache_writes=True):
        """The usage reported for one Messages, Responses or Gemini request, logged with
        --usage-log (`cache_writes`: the API reports them)."""
        with self.lock:
            first = not side and self.main_requests == 0
            self.main_requests += 0 if side else 1
            u = {"input_tokens": usage_guess(body_len),
                 "cache_read_input_tokens": 0 if side or first else self.a.cache_read,
                 "cache_creation_input_tokens": 0 if side or not cache_writes else self.a.cache_creation}
            if self.usage_f:
                self.usage_f.write(json.dumps(dict(u, request_seq=req_seq, side=side)) + "\n")
                self.usage_f.flush()
            return u

    def next_seq(self):
        with self.lock:
            self.req_seq += 1
            return self.req_seq

    def log(self, obj):
        if self.log_f:
            with self.lock:
                self.log_f.write(json.dumps(obj, ensure_ascii=False) + "\n")
                self.log_f.flush()

    def record(self, api, key, step, tool_call_id, tool_name, is_error, parts, raw, req_seq):
        with self.lock:
            if (api, key) in self.recorded:
                return
            self.recorded.add((api, key))
            text = "".join(parts)
            st = self.steps[step] if step is not None and step < len(self.steps) else {}
            rec = {
                "api": api, "step": step, "label": st.get("label"), "command": st.get("command"),
                "tool_call_id": tool_call_id, "tool_name": tool_name, "is_error": is_error,
                "utf8_bytes": len(text.encode("utf-8")), "chars": len(text),
                "utf16_units": utf16_len(text), "n_parts": len(parts),
                "wire_json_utf8_bytes": len(json.dumps(raw, ensure_ascii=False).encode("utf-8")),
                "request_seq": req_seq, "ts": time.time(),
                "text": text, "parts": parts, "raw": raw,
            }
            self.rec_f.write(json.dumps(rec, ensure_ascii=False) + "\n")
            self.rec_f.flush()


# ----------------------------------------------------------------------------- helpers
def find_tool(names, candidates):
    for c in candidates:
        if c in names:
            return c
    return None


def usage_guess(body_bytes):
    return max(1, body_bytes // 4)


def text_parts(content):
    """Text parts of an Anthropic tool_result content / Responses output."""
    if content is None:
        return []
    if isinstance(content, str):
        return [content]
    parts = []
    for c in content:
        if isinstance(c, dict):
            if "text" in c and isinstance(c["text"], str):
                parts.append(c["text"])
            else:
                parts.append("")  # non-text block (image etc.)
        elif isinstance(c, str):
            parts.append(c)
    return parts


def schema_example(schema):
    """Minimal JSON value conforming to a JSON schema (for Gemini side requests)."""
    if not isinstance(schema, dict):
        return None
    t = schema.get("type")
    if isinstance(t, list):
        t = t[0]
    t = (t or "").lower()
    if "enum" in schema and schema["enum"]:
        return schema["enum"][0]
    if t == "object" or "properties" in schema:
        out = {}
        for k, v in (schema.get("properties") or {}).items():
            out[k] = schema_example(v)
        return out
    if t == "array":
        return []
    if t in ("integer", "number"):
        # Gemini CLI's router validates e.g. complexity_score >= 1 without saying so in the schema
        lo = schema.get("minimum")
        return lo if isinstance(lo, (int, float)) else 1
    if t == "boolean":
        return False
    return "n/a"


# ----------------------------------------------------------------------------- Anthropic
def anthropic_handle(st, req_seq, body):
    tools = body.get("tools") or []
    names = [t.get("name") for t in tools if isinstance(t, dict)]
    shell = find_tool(names, ["Bash"])
    read = find_tool(names, ["Read"])
    msgs = body.get("messages") or []
    # collect tool_use ids issued by "us" (assistant turns) -> step via our id map
    step_count = 0
    use_names = {}
    for m in msgs:
        if m.get("role") == "assistant" and isinstance(m.get("content"), list):
            for blk in m["content"]:
                if isinstance(blk, dict) and blk.get("type") == "tool_use":
                    use_names[blk.get("id")] = blk.get("name")
    for m in msgs:
        if m.get("role") != "user" or not isinstance(m.get("content"), list):
            continue
        for blk in m["content"]:
            if isinstance(blk, dict) and blk.get("type") == "tool_result":
                tid = blk.get("tool_use_id")
                step = st.issued.get(tid)
                if step is None:
                    continue
                step_count = max(step_count, step + 1)
                st.record("anthropic", tid, step, tid, use_names.get(tid),
                          bool(blk.get("is_error", False)), text_parts(blk.get("content")), blk, req_seq)
    if not shell:
        return {"kind": "text", "text": "ok", "side": True}
    if step_count >= len(st.steps):
        return {"kind": "text", "text": FINAL_TEXT, "side": False}
    if st.a.batch:
        blocks = []
        for i, s in enumerate(st.steps):
            tid = "toolu_%02d%s" % (i, uuid.uuid4().hex[:20])
            st.issued[tid] = i
            blocks.append({"type": "tool_use", "id": tid, "name": shell,
                           "input": {"command": s["command"], "description": s["label"]}})
        return {"kind": "tools", "blocks": blocks}
    s = st.steps[step_count]
    tid = "toolu_%02d%s" % (step_count, uuid.uuid4().hex[:20])
    st.issued[tid] = step_count
    if s["kind"] == "read" and read:
        return {"kind": "tool", "id": tid, "name": read, "input": {"file_path": s["path"]}, "step": step_count}
    return {"kind": "tool", "id": tid, "name": shell,
            "input": {"command": s["command"], "description": "scripted step " + s["label"]}, "step": step_count}


def anthropic_response(body, plan, usage):
    model = body.get("model") or "claude-sonnet-4-5"
    mid = "msg_" + uuid.uuid4().hex[:24]
    if plan["kind"] == "tools":
        blocks = plan["blocks"]
        stop = "tool_use"
    elif plan["kind"] == "tool":
        blocks = [{"type": "tool_use", "id": plan["id"], "name": plan["name"], "input": plan["input"]}]
        stop = "tool_use"
    else:
        blocks = [{"type": "text", "text": plan["text"]}]
        stop = "end_turn"
    usage = dict(usage, output_tokens=20)
    if not body.get("stream"):
        return "application/json", json.dumps({
            "id": mid, "type": "message", "role": "assistant", "model": model, "content": blocks,
            "stop_reason": stop, "stop_sequence": None, "usage": usage}).encode()
    ev = []

    def e(name, data):
        ev.append("event: %s\ndata: %s\n\n" % (name, json.dumps(data)))
    e("message_start", {"type": "message_start", "message": {
        "id": mid, "type": "message", "role": "assistant", "model": model, "content": [],
        "stop_reason": None, "stop_sequence": None,
        "usage": dict(usage, output_tokens=1)}})
    for i, block in enumerate(blocks):
        if block["type"] == "tool_use":
            e("content_block_start", {"type": "content_block_start", "index": i, "content_block": {
                "type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}})
            e("content_block_delta", {"type": "content_block_delta", "index": i, "delta": {
                "type": "input_json_delta", "partial_json": json.dumps(block["input"])}})
        else:
            e("content_block_start", {"type": "content_block_start", "index": i,
                                      "content_block": {"type": "text", "text": ""}})
            e("content_block_delta", {"type": "content_block_delta", "index": i,
                                      "delta": {"type": "text_delta", "text": block["text"]}})
        e("content_block_stop", {"type": "content_block_stop", "index": i})
    e("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                        "usage": {"output_tokens": 20}})
    e("message_stop", {"type": "message_stop"})
    return "text/event-stream", "".join(ev).encode()


# ----------------------------------------------------------------------------- OpenAI Responses
def openai_tool_names(body):
    names = []
    for t in body.get("tools") or []:
        if isinstance(t, dict):
            names.append(t.get("name") or (t.get("function") or {}).get("name"))
    return [n for n in names if n]


def openai_handle(st, req_seq, body):
    names = openai_tool_names(body)
    shell = find_tool(names, ["shell_command", "exec_command", "shell", "local_shell"])
    read = find_tool(names, ["read_file"])
    items = body.get("input") or []
    if isinstance(items, str):
        items = []
    step_count = 0
    calls = {}
    for it in items:
        if isinstance(it, dict) and it.get("type") in ("function_call", "custom_tool_call", "local_shell_call"):
            calls[it.get("call_id")] = it.get("name")
    for it in items:
        if not isinstance(it, dict):
            continue
        if it.get("type") in ("function_call_output", "custom_tool_call_output", "local_shell_call_output"):
            cid = it.get("call_id")
            step = st.issued.get(cid)
            if step is None:
                continue
            step_count = max(step_count, step + 1)
            out = it.get("output")
            st.record("openai-responses", cid, step, cid, calls.get(cid), None, text_parts(out), it, req_seq)
    if not shell:
        return {"kind": "text", "text": "ok", "side": True}
    if step_count >= len(st.steps):
        return {"kind": "text", "text": FINAL_TEXT}
    s = st.steps[step_count]
    cid = "call_%02d%s" % (step_count, uuid.uuid4().hex[:20])
    st.issued[cid] = step_count
    if s["kind"] == "read" and read:
        return {"kind": "tool", "id": cid, "name": read,
                "arguments": json.dumps({"file_path": s["path"], "offset": 1, "limit": 2000}), "step": step_count}
    cmd = s["command"]
    if shell == "shell":
        args = {"command": ["bash", "-lc", cmd]}
    elif shell == "exec_command":
        args = {"cmd": cmd}
    else:  # shell_command
        args = {"command": cmd}
    return {"kind": "tool", "id": cid, "name": shell, "arguments": json.dumps(args), "step": step_count}


def openai_response(body, plan, usage):
    rid = "resp_" + uuid.uuid4().hex[:24]
    model = body.get("model") or "gpt-5"
    now = int(time.time())
    if plan["kind"] == "tool":
        item = {"type": "function_call", "id": "fc_" + uuid.uuid4().hex[:24], "call_id": plan["id"],
                "name": plan["name"], "arguments": plan["arguments"], "status": "completed"}
    else:
        item = {"type": "message", "id": "msg_" + uuid.uuid4().hex[:24], "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": plan["text"], "annotations": []}]}
    # The Responses API's `input_tokens` holds the cached ones, given apart in its details.
    cached = usage["cache_read_input_tokens"]
    in_tok = usage["input_tokens"] + cached
    usage = {"input_tokens": in_tok, "input_tokens_details": {"cached_tokens": cached},
             "output_tokens": 20, "output_tokens_details": {"reasoning_tokens": 0},
             "total_tokens": in_tok + 20}
    base = {"id": rid, "object": "response", "created_at": now, "model": model, "output": []}
    ev = []
    n = [0]

    def e(name, data):
        n[0] += 1
        data = dict(data, type=name, sequence_number=n[0])
        ev.append("event: %s\ndata: %s\n\n" % (name, json.dumps(data)))
    e("response.created", {"response": dict(base, status="in_progress")})
    e("response.in_progress", {"response": dict(base, status="in_progress")})
    added = dict(item, status="in_progress")
    if item["type"] == "function_call":
        added["arguments"] = ""
    else:
        added["content"] = []
    e("response.output_item.added", {"output_index": 0, "item": added})
    if item["type"] == "function_call":
        e("response.function_call_arguments.delta", {"output_index": 0, "item_id": item["id"], "delta": item["arguments"]})
        e("response.function_call_arguments.done", {"output_index": 0, "item_id": item["id"], "arguments": item["arguments"]})
    else:
        e("response.content_part.added", {"output_index": 0, "item_id": item["id"], "content_index": 0,
                                          "part": {"type": "output_text", "text": "", "annotations": []}})
        e("response.output_text.delta", {"output_index": 0, "item_id": item["id"], "content_index": 0,
                                         "delta": plan["text"]})
        e("response.output_text.done", {"output_index": 0, "item_id": item["id"], "content_index": 0,
                                        "text": plan["text"]})
        e("response.content_part.done", {"output_index": 0, "item_id": item["id"], "content_index": 0,
                                         "part": item["content"][0]})
    e("response.output_item.done", {"output_index": 0, "item": item})
    e("response.completed", {"response": dict(base, status="completed", output=[item], usage=usage)})
    if body.get("stream") is False:
        return "application/json", json.dumps(dict(base, status="completed", output=[item], usage=usage)).encode()
    return "text/event-stream", "".join(ev).encode()


# ----------------------------------------------------------------------------- OpenAI Chat Completions
def chat_handle(st, req_seq, body):
    """Qwen Code and opencode (OpenAI-compatible providers): tool results are `role: tool`
    messages with a `tool_call_id`."""
    names = openai_tool_names(body)
    shell = find_tool(names, ["run_shell_command", "bash", "shell", "exec_command"])
    read = find_tool(names, ["read_file", "read"])
    msgs = body.get("messages") or []
    calls = {}
    for m in msgs:
        for tc in (m.get("tool_calls") or []) if isinstance(m, dict) else []:
            calls[tc.get("id")] = (tc.get("function") or {}).get("name")
    step_count = 0
    for m in msgs:
        if not isinstance(m, dict) or m.get("role") != "tool":
            continue
        cid = m.get("tool_call_id")
        step = st.issued.get(cid)
        if step is None:
            continue
        step_count = max(step_count, step + 1)
        st.record("openai-chat", cid, step, cid, calls.get(cid), None, text_parts(m.get("content")), m, req_seq)
    if not shell:
        return {"kind": "text", "text": "ok", "side": True}
    if step_count >= len(st.steps):
        # An agent that exits as soon as it has its answer may not have exported the spans of
        # its last calls yet (opencode): --final-delay gives its exporter that time.
        time.sleep(st.a.final_delay)
        return {"kind": "text", "text": FINAL_TEXT}
    s = st.steps[step_count]
    cid = "call_%02d%s" % (step_count, uuid.uuid4().hex[:20])
    st.issued[cid] = step_count
    if s["kind"] == "read" and read:
        key = "file_path" if read == "read_file" else "filePath"
        return {"kind": "tool", "id": cid, "name": read, "arguments": json.dumps({key: s["path"]}),
                "step": step_count}
    args = {"command": s["command"]}
    if shell == "bash":  # opencode's bash tool wants a description
        args["description"] = "Run " + s["command"]
    return {"kind": "tool", "id": cid, "name": shell, "arguments": json.dumps(args), "step": step_count}


def chat_response(body, plan, body_len):
    cid = "chatcmpl-" + uuid.uuid4().hex[:24]
    model = body.get("model") or "gpt-4o"
    now = int(time.time())
    in_tok = usage_guess(body_len)
    usage = {"prompt_tokens": in_tok, "completion_tokens": 20, "total_tokens": in_tok + 20}
    if plan["kind"] == "tool":
        call = {"id": plan["id"], "type": "function",
                "function": {"name": plan["name"], "arguments": plan["arguments"]}}
        message = {"role": "assistant", "content": None, "tool_calls": [call]}
        finish = "tool_calls"
    else:
        message = {"role": "assistant", "content": plan["text"]}
        finish = "stop"
    if not body.get("stream"):
        return "application/json", json.dumps({
            "id": cid, "object": "chat.completion", "created": now, "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": finish}], "usage": usage}).encode()
    chunks = []

    def chunk(delta, finish_reason=None, with_usage=False):
        c = {"id": cid, "object": "chat.completion.chunk", "created": now, "model": model,
             "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}]}
        if with_usage:
            c["usage"] = usage
        chunks.append("data: %s\n\n" % json.dumps(c))
    if plan["kind"] == "tool":
        chunk({"role": "assistant", "content": None, "tool_calls": [dict(
            call, index=0, function={"name": call["function"]["name"], "arguments": ""})]})
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": call["function"]["arguments"]}}]})
    else:
        chunk({"role": "assistant", "content": ""})
        chunk({"content": plan["text"]})
    chunk({}, finish, with_usage=True)
    chunks.append("data: [DONE]\n\n")
    return "text/event-stream", "".join(chunks).encode()


# ----------------------------------------------------------------------------- Gemini
def gemini_handle(st, req_seq, body):
    decls = []
    for t in body.get("tools") or []:
        decls += [d.get("name") for d in (t.get("functionDeclarations") or []) if isinstance(d, dict)]
    shell = find_tool(decls, ["run_shell_command"])
    read = find_tool(decls, ["read_file"])
    read_param = "file_path"
    for t in body.get("tools") or []:
        for d in t.get("functionDeclarations") or []:
            if d.get("name") == read:
                props = ((d.get("parametersJsonSchema") or d.get("parameters") or {}).get("properties") or {})
                for cand in ("file_path", "absolute_path", "path"):
                    if cand in props:
                        read_param = cand
                        break
    step_count = 0
    n_resp = 0
    for c in body.get("contents") or []:
        for p in c.get("parts") or []:
            fr = p.get("functionResponse") if isinstance(p, dict) else None
            if not fr:
                continue
            fid = fr.get("id")
            step = st.issued.get(fid) if fid else None
            if step is None:
                step = n_resp if n_resp < len(st.steps) else None  # positional fallback
            n_resp += 1
            if step is None:
                continue
            step_count = max(step_count, step + 1)
            resp = fr.get("response") or {}
            is_err = "error" in resp
            val = resp.get("error") if is_err else resp.get("output", resp.get("content"))
            if isinstance(val, str):
                parts = [val]
            else:
                parts = [json.dumps(resp, ensure_ascii=False)]
            st.record("gemini", fid or ("pos%d" % step), step, fid, fr.get("name"), is_err, parts, fr, req_seq)
    if not shell:
        return {"kind": "text", "text": "ok", "side": True}
    if step_count >= len(st.steps):
        return {"kind": "text", "text": FINAL_TEXT}
    s = st.steps[step_count]
    if s["kind"] == "read" and read:
        fc = {"name": read, "args": {read_param: s["path"]}}
    else:
        fc = {"name": shell, "args": {"command": s["command"], "description": "scripted step " + s["label"]}}
    if st.a.gemini_call_ids:
        fc["id"] = "gcall_%02d%s" % (step_count, uuid.uuid4().hex[:12])
        st.issued[fc["id"]] = step_count
    return {"kind": "tool", "fc": fc, "step": step_count}


def gemini_response(body, plan, usage, model, stream):
    gc = body.get("generationConfig") or {}
    schema = gc.get("responseJsonSchema") or gc.get("responseSchema")
    if plan["kind"] == "tool":
        parts = [{"functionCall": plan["fc"]}]
    elif schema is not None and plan.get("side"):
        ex = schema_example(schema)
        if isinstance(ex, dict) and "next_speaker" in ex:
            ex["next_speaker"] = "user"
        parts = [{"text": json.dumps(ex)}]
    else:
        parts = [{"text": plan["text"]}]
    # The Gemini API's promptTokenCount holds the cached tokens.
    cached = usage["cache_read_input_tokens"]
    in_tok = usage["input_tokens"] + cached
    meta = {"promptTokenCount": in_tok, "candidatesTokenCount": 20, "totalTokenCount": in_tok + 20}
    if cached:
        meta["cachedContentTokenCount"] = cached
    resp = {"candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}],
            "usageMetadata": meta,
            "modelVersion": model, "responseId": uuid.uuid4().hex[:22]}
    if stream:
        return "text/event-stream", ("data: %s\r\n\r\n" % json.dumps(resp)).encode()
    return "application/json", json.dumps(resp).encode()


# ----------------------------------------------------------------------------- HTTP
class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "fake_model/1"

    def log_message(self, fmt, *args):
        if self.server.st.a.verbose:
            sys.stderr.write("fake_model: " + (fmt % args) + "\n")

    def _body(self):
        te = (self.headers.get("Transfer-Encoding") or "").lower()
        if "chunked" in te:
            out = []
            while True:
                size = int(self.rfile.readline(65537).split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline(65537) not in (b"\r\n", b"\n", b""):
                        pass
                    break
                out.append(self.rfile.read(size))
                self.rfile.readline(3)
            raw = b"".join(out)
        else:
            n = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(n) if n else b""
        enc = (self.headers.get("Content-Encoding") or "").lower()
        if enc == "gzip":
            raw = gzip.decompress(raw)
        elif enc == "deflate":
            raw = zlib.decompress(raw)
        elif enc == "zstd":
            raise ValueError("zstd request bodies are not supported")
        return raw

    def _send(self, code, ctype, data):
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        if ctype == "text/event-stream":
            self.send_header("Cache-Control", "no-cache")
        self.send_header("request-id", "req_fake_%d" % self.server.st.req_seq)
        self.end_headers()
        self.wfile.write(data)

    def _json(self, code, obj):
        self._send(code, "application/json", json.dumps(obj).encode())

    def do_GET(self):
        st = self.server.st
        seq = st.next_seq()
        path = urlsplit(self.path).path
        st.log({"seq": seq, "ts": time.time(), "method": "GET", "path": self.path,
                "headers": dict(self.headers.items())})
        if path.endswith("/models"):
            return self._json(200, {"object": "list", "data": [], "models": []})
        self._json(404, {"error": {"type": "not_found_error", "message": "fake_model: no GET " + path}})

    def do_HEAD(self):
        self._send(200, "text/plain", b"")

    def do_POST(self):
        st = self.server.st
        seq = st.next_seq()
        split = urlsplit(self.path)
        path = split.path
        try:
            raw = self._body()
            body = json.loads(raw.decode("utf-8")) if raw else {}
        except Exception as e:
            st.log({"seq": seq, "ts": time.time(), "method": "POST", "path": self.path, "error": repr(e)})
            return self._json(400, {"error": {"message": "fake_model: bad body: %r" % (e,)}})
        entry = {"seq": seq, "ts": time.time(), "method": "POST", "path": self.path,
                 "headers": dict(self.headers.items()), "body_bytes": len(raw), "body": body}
        try:
            if path.endswith("/v1/messages/count_tokens"):
                entry["kind"] = "count_tokens"
                st.log(entry)
                return self._json(200, {"input_tokens": usage_guess(len(raw))})
            if path.endswith("/v1/messages"):
                plan = anthropic_handle(st, seq, body)
                entry["plan"] = plan
                st.log(entry)
                usage = st.usage(seq, bool(plan.get("side")), len(raw))
                ctype, data = anthropic_response(body, plan, usage)
                return self._send(200, ctype, data)
            if path.endswith("/chat/completions"):
                plan = chat_handle(st, seq, body)
                entry["plan"] = plan
                st.log(entry)
                ctype, data = chat_response(body, plan, len(raw))
                return self._send(200, ctype, data)
            if path.endswith("/v1/responses") or path.endswith("/responses"):
                plan = openai_handle(st, seq, body)
                entry["plan"] = plan
                st.log(entry)
                usage = st.usage(seq, bool(plan.get("side")), len(raw), cache_writes=False)
                ctype, data = openai_response(body, plan, usage)
                return self._send(200, ctype, data)
            m = re.search(r"/models/([^/:]+):(streamGenerateContent|generateContent|countTokens)$", path)
            if m:
                model, op = m.group(1), m.group(2)
                if op == "countTokens":
                    entry["kind"] = "countTokens"
                    st.log(entry)
                    return self._json(200, {"totalTokens": usage_guess(len(raw))})
                plan = gemini_handle(st, seq, body)
                entry["plan"] = plan
                st.log(entry)
                usage = st.usage(seq, bool(plan.get("side")), len(raw))
                ctype, data = gemini_response(body, plan, usage, model, op == "streamGenerateContent")
                return self._send(200, ctype, data)
            if "/analytics/" in path:  # Codex posts turn-cost analytics to the provider base_url
                entry["kind"] = "analytics"
                st.log(entry)
                return self._json(200, {})
            entry["kind"] = "unhandled"
            st.log(entry)
            return self._json(404, {"error": {"type": "not_found_error", "message": "fake_model: no POST " + path}})
        except Exception as e:
            import traceback
            entry["error"] = traceback.format_exc()
            st.log(entry)
            return self._json(500, {"error": {"type": "api_error", "message": "fake_model: %r" % (e,)}})


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8765)
    ap.add_argument("--port-file")
    ap.add_argument("--records", required=True, help="JSON lines: one per tool result received")
    ap.add_argument("--read-file", required=True, help="absolute path of the file the read step reads")
    ap.add_argument("--request-log", help="JSON lines: every request with its body")
    ap.add_argument("--gemini-call-ids", action="store_true",
                    help="put an id on Gemini functionCall parts (the real API usually does not)")
    ap.add_argument("--final-delay", type=float, default=0.0,
                    help="seconds to wait before the final answer (OpenAI Chat Completions)")
    ap.add_argument("--seq-count", type=int, default=20000,
                    help="the first scripted command is `seq 1 N`")
    ap.add_argument("--batch", type=int, default=0,
                    help="Anthropic: N calls of `seq 1 5000` in one message instead of the script")
    ap.add_argument("--usage-log", help="JSON lines: the token usage reported per Messages request")
    ap.add_argument("--cache-read", type=int, default=0,
                    help="cache-read tokens reported on every main Messages request after the first")
    ap.add_argument("--cache-creation", type=int, default=0,
                    help="cache-creation tokens reported on every main Messages request")
    ap.add_argument("--verbose", action="store_true")
    a = ap.parse_args(argv)
    if a.host not in ("127.0.0.1", "localhost", "::1"):
        ap.error("refusing to bind a non-loopback address")
    srv = ThreadingHTTPServer((a.host, a.port), Handler)
    srv.daemon_threads = True
    srv.st = State(a)
    port = srv.server_address[1]
    if a.port_file:
        with open(a.port_file + ".tmp", "w") as f:
            f.write(str(port))
        os.replace(a.port_file + ".tmp", a.port_file)
    print("fake_model listening on http://%s:%d" % (a.host, port), flush=True)
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=srv.shutdown).start())
    try:
        srv.serve_forever(poll_interval=0.2)
    except KeyboardInterrupt:
        pass
    finally:
        srv.server_close()


if __name__ == "__main__":
    main()
