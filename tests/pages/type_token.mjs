// Types a token into the sign-in box of a toolsize page in a real headless Chromium, through the
// DevTools protocol's input events (a focused field, inserted text, an Enter key press), and
// reports what the page then shows. Run with `node --experimental-websocket` (Node 20; built in
// from Node 22). Usage: node type_token.mjs CHROMIUM PROFILE_DIR URL TOKEN [late-401]
// Prints one JSON line: {"box": bool, "state": "...", "rows": N, "signin_after": bool,
// "address": "...", "first_ms": N, "after_ms": N, "kept": bool|null}.
//
// With `late-401`, the answers (401) to the page's next refresh, asked before the token was
// typed, are held (DevTools' Fetch domain) until the token was typed and the reload asked for;
// the reload itself is held until the page has read them and asked the API again, so they come
// between the two as they can on a busy machine. `kept` says whether the page's next requests
// still carried the typed token.
//
// Deadlines follow what this machine takes now: Chromium's start and the first render of the
// page (the sign-in box) get STARTUP_MS, a bound for a cold start on a busy machine; what
// follows the token (a reload, a render, the API asked with the token) is the same work again,
// and gets ten times what the first render took (at least 20 s).
import { spawn } from "node:child_process";
import { readFileSync, existsSync } from "node:fs";
import { join } from "node:path";

const [chromium, profile, url, token, mode] = process.argv.slice(2);
const late401 = mode === "late-401";
const browser = spawn(chromium, [
  "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
  "--disable-background-networking", "--disable-component-update", "--disable-sync",
  "--remote-debugging-port=0", `--user-data-dir=${profile}`, url,
], { stdio: "ignore" });
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const STARTUP_MS = 240_000;
const started = Date.now();
let deadline = started + STARTUP_MS;
const fail = (why) => { console.error(why); browser.kill("SIGKILL"); process.exit(1); };

async function main() {
  const portFile = join(profile, "DevToolsActivePort");
  while (!existsSync(portFile)) { if (Date.now() > deadline) fail("no DevToolsActivePort"); await sleep(50); }
  let target;
  let seen = "nothing";
  while (!target) {
    if (Date.now() > deadline) fail(`no page target (last: ${seen})`);
    try {
      // Read again each time: Chromium may have created the file and not yet written it.
      const port = readFileSync(portFile, "utf8").split("\n")[0].trim();
      const list = await (await fetch(`http://127.0.0.1:${port}/json/list`)).json();
      seen = JSON.stringify(list.map((t) => [t.type, t.url]));
      target = list.find((t) => t.type === "page" && t.url.startsWith(url.split("#")[0].split("?")[0]));
    } catch (e) { seen = String(e); }
    if (!target) await sleep(50);
  }
  const ws = new WebSocket(target.webSocketDebuggerUrl);
  await new Promise((r, j) => { ws.onopen = r; ws.onerror = j; });
  let id = 0;
  const pending = new Map();
  const paused = [];
  ws.onmessage = (m) => {
    const msg = JSON.parse(m.data);
    if (msg.id && pending.has(msg.id)) { pending.get(msg.id)(msg); pending.delete(msg.id); }
    if (msg.method === "Fetch.requestPaused") paused.push(msg.params);
  };
  const send = (method, params = {}) => new Promise((r) => {
    const n = ++id; pending.set(n, r); ws.send(JSON.stringify({ id: n, method, params }));
  });
  const evaluate = async (expr) => (await send("Runtime.evaluate", { expression: expr, returnByValue: true })).result?.result?.value;
  // What the page shows, for a failure's message.
  const shows = () => evaluate(`JSON.stringify({state: document.body && document.body.dataset.state,
    signin: !!document.getElementById('signin'), stored: sessionStorage.getItem('toolsize.token') !== null,
    banner: (document.getElementById('banner') || {}).textContent})`);
  const until = async (expr, what) => {
    while (!(await evaluate(expr))) {
      if (Date.now() > deadline) fail("timed out waiting for " + what + "; the page shows " + (await shows()));
      await sleep(100);
    }
  };

  await until("!!document.getElementById('token-input')", "the sign-in box");
  const box = true;
  const first_ms = Date.now() - started;
  deadline = Date.now() + Math.max(20_000, 10 * first_ms);
  const held = (pred) => paused.filter(pred);
  const isApi = (p) => p.request.url.includes("/api/v1/");
  if (late401) {
    await send("Fetch.enable", { patterns: [
      { urlPattern: "*/api/v1/*", requestStage: "Response" },
      { resourceType: "Document", requestStage: "Request" },
    ] });
    // The next refresh (every 2 s) asks without the token: its answers are held.
    while (held(isApi).length === 0) {
      if (Date.now() > deadline) fail("no refresh asked the API");
      await sleep(50);
    }
  }
  const typed = Date.now();
  await evaluate("document.getElementById('token-input').focus()");
  await send("Input.insertText", { text: token });
  const enter = { key: "Enter", code: "Enter", windowsVirtualKeyCode: 13, nativeVirtualKeyCode: 13 };
  await send("Input.dispatchKeyEvent", { type: "keyDown", text: "\r", ...enter });
  await send("Input.dispatchKeyEvent", { type: "keyUp", ...enter });
  let kept = null;
  if (late401) {
    while (held((p) => !isApi(p)).length === 0) {
      if (Date.now() > deadline) fail("the token typed did not reload the page");
      await sleep(50);
    }
    // The reload waits; the refused answers reach the page that is still there, which then
    // asks the API again: with the typed token if it kept it, without if the refusal made it
    // forget it. (DevTools runs no script in a page whose navigation is held, so what the page
    // keeps is read from what it sends.)
    const api = held(isApi);
    for (const p of api) {
      if (p.responseStatusCode !== 401) fail(`a held answer is ${p.responseStatusCode}, not 401`);
      await send("Fetch.continueRequest", { requestId: p.requestId });
    }
    const after = () => paused.filter((p) => isApi(p) && !api.includes(p));
    while (after().length === 0) {
      if (Date.now() > deadline) fail("the page asked nothing after the refused answers");
      await sleep(50);
    }
    const bearer = (p) => Object.entries(p.request.headers)
      .find(([k]) => k.toLowerCase() === "authorization")?.[1];
    kept = after().every((p) => bearer(p) === "Bearer " + token);
    const rest = paused.splice(0).filter((p) => !api.includes(p));
    await send("Fetch.disable");
    // Those still held go on (an answer saying one already went is no matter).
    for (const p of rest) await send("Fetch.continueRequest", { requestId: p.requestId });
  }
  // The page reloads and asks the API with the token.
  await until("document.readyState === 'complete' && document.body.dataset.state === 'ok'",
    `the page to render (the first render took ${first_ms} ms)`);
  const out = {
    box,
    state: await evaluate("document.body.dataset.state"),
    rows: await evaluate("document.querySelectorAll('#tools-body tr').length"),
    signin_after: await evaluate("!!document.getElementById('signin')"),
    address: await evaluate("location.href"),
    first_ms,
    after_ms: Date.now() - typed,
    kept,
  };
  console.log(JSON.stringify(out));
  ws.close();
  browser.kill("SIGKILL");
  process.exit(0);
}
main().catch((e) => fail(String(e)));
