// Types a token into the sign-in box of a toolsize page in a real headless Chromium, through the
// DevTools protocol's input events (a focused field, inserted text, an Enter key press), and
// reports what the page then shows. Run with `node --experimental-websocket` (Node 20; built in
// from Node 22). Usage: node type_token.mjs CHROMIUM PROFILE_DIR URL TOKEN
// Prints one JSON line: {"box": bool, "state": "...", "rows": N, "signin_after": bool,
// "address": "...", "first_ms": N, "after_ms": N}.
//
// Deadlines follow what this machine takes now: Chromium's start and the first render of the
// page (the sign-in box) get STARTUP_MS, a bound for a cold start on a busy machine; what
// follows the token (a reload, a render, the API asked with the token) is the same work again,
// and gets ten times what the first render took (at least 20 s).
import { spawn } from "node:child_process";
import { readFileSync, existsSync } from "node:fs";
import { join } from "node:path";

const [chromium, profile, url, token] = process.argv.slice(2);
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
  ws.onmessage = (m) => {
    const msg = JSON.parse(m.data);
    if (msg.id && pending.has(msg.id)) { pending.get(msg.id)(msg); pending.delete(msg.id); }
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
  const typed = Date.now();
  await evaluate("document.getElementById('token-input').focus()");
  await send("Input.insertText", { text: token });
  const enter = { key: "Enter", code: "Enter", windowsVirtualKeyCode: 13, nativeVirtualKeyCode: 13 };
  await send("Input.dispatchKeyEvent", { type: "keyDown", text: "\r", ...enter });
  await send("Input.dispatchKeyEvent", { type: "keyUp", ...enter });
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
  };
  console.log(JSON.stringify(out));
  ws.close();
  browser.kill("SIGKILL");
  process.exit(0);
}
main().catch((e) => fail(String(e)));
