#!/usr/bin/env node
// Runs the `toolsize` binary of this platform's package. The binary comes in a package of its
// own per platform (`@toolsize/linux-x64`), an optional dependency that npm installs only where
// its `os` and `cpu` match, as esbuild and Biome ship theirs: nothing is downloaded at install
// time. Arguments, standard streams and the exit code pass through; SIGINT, SIGTERM and SIGHUP
// are passed on to the binary, and a binary killed by a signal kills this process with it.
"use strict";

const { spawn } = require("node:child_process");

/** `${process.platform} ${process.arch}` to the package holding the binary for it. */
const PLATFORMS = { "linux x64": "@toolsize/linux-x64" };
const FORWARDED_SIGNALS = ["SIGINT", "SIGTERM", "SIGHUP"];

/** Exits 2 with toolsize's structured error on standard error. */
function fail(code, message) {
  process.stderr.write(`${JSON.stringify({ ok: false, error: { code, message } })}\n`);
  process.exit(2);
}

const platform = `${process.platform} ${process.arch}`;
const pkg = PLATFORMS[platform];
if (!pkg) {
  fail(
    "UNSUPPORTED_PLATFORM",
    `toolsize has no build for ${platform} (builds: ${Object.keys(PLATFORMS).join(", ")}); ` +
      "build it from source with `cargo install --path . --features collector,tls`",
  );
}
let binary;
try {
  binary = require.resolve(`${pkg}/bin/toolsize`);
} catch {
  fail(
    "BINARY_MISSING",
    `the package ${pkg} that holds the toolsize binary is not installed; ` +
      "reinstall toolsize without --omit=optional (or --no-optional)",
  );
}

const child = spawn(binary, process.argv.slice(2), { stdio: "inherit" });
for (const signal of FORWARDED_SIGNALS) {
  process.on(signal, () => child.kill(signal));
}
child.on("error", (e) => fail("SPAWN", `cannot run ${binary}: ${e.message}`));
child.on("exit", (code, signal) => {
  if (signal) {
    process.removeAllListeners(signal);
    process.kill(process.pid, signal);
  } else {
    process.exit(code ?? 1);
  }
});
