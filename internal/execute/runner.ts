// pml's code runner. pml starts it in the pml/deno container as
//
//   deno run --no-prompt --no-remote --no-npm ... data:application/typescript;base64,<this file>
//
// with no --allow-* flag, so the code it runs can read no file, open no
// socket, start no process and see no environment variable: its only way
// out is `mcp.<namespace>.<action>(args)`, which this runner turns into a
// JSON-RPC request on stdout that pml answers on stdin. The protocol is
// described in the Go package (internal/execute, doc.go).
//
// Everything here is written defensively against the code it runs: the
// references it needs (stdout, JSON, the pending map) are taken before the
// code starts, and the code's console output goes to stderr so it cannot
// interleave with the protocol by accident.

type Json = null | boolean | number | string | Json[] | { [k: string]: Json };

interface Failure {
  tool: string;
  error: string;
}

interface Pending {
  tool: string;
  resolve: (v: unknown) => void;
  reject: (e: Error) => void;
}

const encoder = new TextEncoder();
const stdout = Deno.stdout;
const stderr = Deno.stderr;
const stringify = JSON.stringify;
const parse = JSON.parse;
const exit = Deno.exit;
const inspect = Deno.inspect;

function writeAll(w: { writeSync(p: Uint8Array): number }, bytes: Uint8Array) {
  let off = 0;
  while (off < bytes.length) off += w.writeSync(bytes.subarray(off));
}

// send writes one message as one line. Writes are synchronous, so a line is
// never split by another message.
function send(msg: Record<string, unknown>) {
  writeAll(stdout, encoder.encode(stringify({ jsonrpc: "2.0", ...msg }) + "\n"));
}

function log(text: string) {
  writeAll(stderr, encoder.encode(text + "\n"));
}

// Console output of the code goes to stderr: stdout carries only protocol.
function format(args: unknown[]): string {
  return args.map((a) => (typeof a === "string" ? a : inspect(a))).join(" ");
}
{
  // deno-lint-ignore no-explicit-any
  const c = console as any;
  for (const name of ["log", "info", "debug", "dir", "dirxml", "table"]) {
    c[name] = (...args: unknown[]) => log(format(args));
  }
  // Deno's count and time* print to stdout without going through log.
  const counts = new Map<string, number>();
  const timers = new Map<string, number>();
  c.count = (label = "default") => {
    const n = (counts.get(label) ?? 0) + 1;
    counts.set(label, n);
    log(`${label}: ${n}`);
  };
  c.countReset = (label = "default") => counts.delete(label);
  c.time = (label = "default") => timers.set(label, performance.now());
  c.timeLog = (label = "default", ...data: unknown[]) => {
    const t = timers.get(label);
    log(t === undefined ? `Timer "${label}" does not exist` : `${label}: ${(performance.now() - t).toFixed(0)}ms ${format(data)}`.trimEnd());
  };
  c.timeEnd = (label = "default") => {
    c.timeLog(label);
    timers.delete(label);
  };
}

// The code's source appears in error messages as a long data: URL; this is
// replaced by "<code>" so that errors stay readable.
let codeURL = "";
function describe(e: unknown): string {
  let text: string;
  if (e instanceof Error) {
    text = e.name ? `${e.name}: ${e.message}` : e.message;
  } else {
    try {
      text = typeof e === "string" ? e : inspect(e);
    } catch {
      text = String(e);
    }
  }
  if (codeURL) text = text.split(codeURL).join("<code>");
  return text;
}

// --- calls ----------------------------------------------------------------

let nextID = 0;
const pending = new Map<number, Pending>();
const failures: Failure[] = [];

class ToolError extends Error {
  tool: string;
  constructor(tool: string, message: string) {
    super(message);
    this.name = "ToolError";
    this.tool = tool;
  }
}

function callTool(tool: string, args: unknown): Promise<unknown> {
  if (args === undefined) args = {};
  if (args === null || typeof args !== "object" || Array.isArray(args)) {
    return Promise.reject(new TypeError(`mcp.${tool.replace(":", ".")} takes one object argument, e.g. ({path: "x"})`));
  }
  let params: string;
  try {
    params = stringify({ name: tool, arguments: args });
  } catch (e) {
    return Promise.reject(new TypeError(`the arguments of mcp.${tool.replace(":", ".")} are not JSON: ${describe(e)}`));
  }
  const id = ++nextID;
  return new Promise((resolve, reject) => {
    pending.set(id, { tool, resolve, reject });
    writeAll(stdout, encoder.encode(`{"jsonrpc":"2.0","id":${id},"method":"tools/call","params":${params}}\n`));
  });
}

// The text of a result's text contents, one per line.
function textOf(result: { content?: unknown }): string {
  const parts: string[] = [];
  if (Array.isArray(result.content)) {
    for (const c of result.content) {
      if (c && typeof c === "object" && c.type === "text" && typeof c.text === "string") parts.push(c.text);
    }
  }
  return parts.join("\n");
}

function settle(msg: { id?: unknown; result?: unknown; error?: unknown }) {
  if (typeof msg.id !== "number") return;
  const p = pending.get(msg.id);
  if (!p) return;
  pending.delete(msg.id);
  if (msg.error !== undefined && msg.error !== null) {
    const e = msg.error as { message?: unknown };
    const message = typeof e.message === "string" && e.message ? e.message : "the call failed";
    failures.push({ tool: p.tool, error: message });
    p.reject(new ToolError(p.tool, message));
    return;
  }
  const r = (msg.result ?? {}) as { isError?: unknown; structuredContent?: unknown; content?: unknown };
  if (r.isError === true) {
    const message = textOf(r) || `${p.tool} failed`;
    failures.push({ tool: p.tool, error: message });
    p.reject(new ToolError(p.tool, message));
    return;
  }
  if (r.structuredContent !== undefined && r.structuredContent !== null) {
    p.resolve(r.structuredContent);
  } else {
    p.resolve(textOf(r));
  }
}

// mcp.<namespace>.<action>(args). "then" is never a namespace or an action,
// so `await mcp.fs` does not hang waiting for a call.
const mcp = new Proxy(Object.create(null), {
  get(_t, ns) {
    if (typeof ns !== "string" || ns === "then") return undefined;
    return new Proxy(Object.create(null), {
      get(_t2, action) {
        if (typeof action !== "string" || action === "then") return undefined;
        return (args?: unknown) => callTool(`${ns}:${action}`, args);
      },
    });
  },
});
Object.defineProperty(globalThis, "mcp", { value: mcp, writable: false, configurable: false });

// --- the end --------------------------------------------------------------

let finished = false;
function finish(status: "success" | "error", result: unknown, error?: string) {
  if (finished) return;
  finished = true;
  let value: Json = null;
  if (status === "success") {
    try {
      // undefined (no return) is null; what JSON cannot hold is an error.
      const text = stringify(result === undefined ? null : result);
      value = text === undefined ? null : parse(text);
    } catch (e) {
      status = "error";
      error = `the code's return value cannot be sent as JSON: ${describe(e)}`;
    }
  }
  const params: Record<string, unknown> = { status, result: value, tool_failures: failures };
  if (status === "error") params.error = error ?? "the code failed";
  send({ method: "pml/done", params });
  exit(0);
}

// An exception nobody catches ends the run as Deno would end the program.
globalThis.addEventListener("error", (e) => {
  e.preventDefault();
  finish("error", null, "Uncaught " + describe(e.error ?? e.message));
});
globalThis.addEventListener("unhandledrejection", (e) => {
  e.preventDefault();
  finish("error", null, "Uncaught (in promise) " + describe(e.reason));
});

// --- stdin ----------------------------------------------------------------

// lines yields stdin line by line; a chunk is scanned once, so long lines
// (large tool results) cost linear time.
async function* lines(): AsyncGenerator<string> {
  const decoder = new TextDecoder();
  let parts: string[] = [];
  for await (const chunk of Deno.stdin.readable) {
    let text = decoder.decode(chunk, { stream: true });
    let i: number;
    while ((i = text.indexOf("\n")) >= 0) {
      parts.push(text.slice(0, i));
      yield parts.join("");
      parts = [];
      text = text.slice(i + 1);
    }
    if (text) parts.push(text);
  }
  const rest = parts.join("") + decoder.decode();
  if (rest) yield rest;
}

interface Program {
  code?: string;
  module?: string;
  export?: string;
  args?: unknown;
}

function moduleURL(source: string): string {
  // base64 of the UTF-8 bytes: btoa takes one byte per character.
  const bytes = encoder.encode(source);
  let bin = "";
  for (let i = 0; i < bytes.length; i += 0x8000) {
    bin += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  }
  return "data:application/typescript;base64," + btoa(bin);
}

// start runs the program. A dynamic import of a data: URL is loaded with the
// program's (empty) permissions, unlike the main module, so whatever the code
// imports is checked too.
async function start(p: Program): Promise<unknown> {
  if (typeof p.code === "string") {
    // The code is the body of an async function: it may await and return.
    // The header shares the first line, so line numbers in errors are the
    // code's own.
    codeURL = moduleURL(`export default async function (mcp: any) {${p.code}\n}\n`);
    const m = await import(codeURL);
    return await m.default(mcp);
  }
  if (typeof p.module === "string") {
    codeURL = moduleURL(p.module);
    const m = await import(codeURL);
    const fns = Object.keys(m).filter((k) => typeof m[k] === "function").sort();
    if (!p.export) return fns;
    if (typeof m[p.export] !== "function") {
      throw new Error(`the module exports no function "${p.export}" (its functions: ${fns.join(", ") || "none"})`);
    }
    return await m[p.export](p.args ?? {});
  }
  throw new Error("the first message names no code or module to run");
}

const input = lines();
const first = await input.next();
if (first.done) {
  log("runner: stdin closed before the program arrived");
  exit(2);
}
let program: Program;
try {
  const msg = parse(first.value);
  if (msg?.method !== "pml/run" || typeof msg.params !== "object" || msg.params === null) {
    throw new Error(`expected a "pml/run" notification, got ${first.value.slice(0, 80)}`);
  }
  program = msg.params;
} catch (e) {
  log("runner: " + describe(e));
  exit(2);
}

// Answers arrive while the code runs, in any order.
(async () => {
  for await (const line of input) {
    if (!line.trim()) continue;
    let msg;
    try {
      msg = parse(line);
    } catch {
      log("runner: ignoring a line that is not JSON");
      continue;
    }
    settle(msg);
  }
  // pml closed stdin: no answer can come any more.
  for (const [id, p] of pending) {
    pending.delete(id);
    p.reject(new Error(`pml closed the connection before answering ${p.tool}`));
  }
})();

start(program!).then(
  (v) => finish("success", v),
  (e) => finish("error", null, describe(e)),
);
