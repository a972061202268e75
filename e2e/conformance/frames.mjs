// Hand-sent frames for what the conformance suite does not check (or
// checks only in a scenario that needs the reference server's fixtures):
// pml's answers to an unknown method, to batches per protocol revision,
// to an unknown revision, and the priming of SSE streams (SEP-1699).
//
//   node frames.mjs URL PML_BIN   (PML_SERVE_TOKEN in the environment)
//
// Prints one line per check; exits 1 when one fails.
import { spawn } from "node:child_process";
import readline from "node:readline";

const [url, pml] = process.argv.slice(2);
const token = process.env.PML_SERVE_TOKEN;
let failed = 0;
const check = (name, ok, detail) => {
  console.error(`  ${ok ? "ok  " : "FAIL"} ${name}${ok ? "" : `: ${detail}`}`);
  if (!ok) failed = 1;
};
const init = (v) => ({ jsonrpc: "2.0", id: 0, method: "initialize", params: { protocolVersion: v, capabilities: {}, clientInfo: { name: "frames", version: "1" } } });
const initialized = { jsonrpc: "2.0", method: "notifications/initialized" };
const ping = (id) => ({ jsonrpc: "2.0", id, method: "ping" });
const note = { jsonrpc: "2.0", method: "notifications/cancelled", params: { requestId: 99 } };

// HTTP: a session of pml serve on revision v.
async function session(v) {
  const base = { authorization: `Bearer ${token}`, "content-type": "application/json", accept: "application/json, text/event-stream" };
  const r = await fetch(url, { method: "POST", headers: base, body: JSON.stringify(init(v)) });
  const body = await r.text();
  const headers = { ...base, "mcp-session-id": r.headers.get("mcp-session-id"), "mcp-protocol-version": v };
  // extra overrides headers; a header set to undefined is left out.
  const post = (msg, extra = {}) => fetch(url, { method: "POST", headers: Object.fromEntries(Object.entries({ ...headers, ...extra }).filter(([, v]) => v !== undefined)), body: JSON.stringify(msg) });
  await (await post(initialized)).text();
  return { post, agreed: /"protocolVersion":"([^"]+)"/.exec(body)?.[1] };
}
// The JSON-RPC messages of an answer, JSON or SSE.
async function messages(r) {
  const text = await r.text();
  if ((r.headers.get("content-type") || "").startsWith("application/json")) return [JSON.parse(text)];
  return text.split("\n").filter((l) => l.startsWith("data: {") || l.startsWith("data: [")).map((l) => JSON.parse(l.slice(6)));
}

{
  const s = await session("2025-11-25");
  const r = await s.post({ jsonrpc: "2.0", id: 7, method: "foo/bar", params: {} });
  const [m] = await messages(r).catch(() => []);
  check("pml serve: an unknown method gets JSON-RPC -32601 with its id", r.status === 200 && m?.id === 7 && m?.error?.code === -32601, `HTTP ${r.status} ${JSON.stringify(m)}`);
  const p = await s.post(ping(8));
  const text = await p.text();
  const first = text.split("\n\n")[0];
  check("pml serve: an SSE stream starts with a priming event (id, retry, no data)", /^id: \S+$/m.test(first) && /^retry: \d+$/m.test(first) && /^data: ?$/m.test(first) && text.includes('"id":8'), JSON.stringify(text.slice(0, 300)));
}
{
  const s = await session("1999-01-01");
  check("pml serve: initialize on an unknown revision is answered with 2025-11-25", s.agreed === "2025-11-25", `agreed ${s.agreed}`);
}
{
  const s = await session("2025-03-26");
  // (One array in JSON, one event per answer on SSE.)
  const ms = (await messages(await s.post([ping(1), note, ping(2)]))).flat();
  check("pml serve: a batch on 2025-03-26 is answered", ms.length === 2 && ms.every((m) => m.result), JSON.stringify(ms));
  const s2 = await session("2025-06-18");
  const r = await s2.post([ping(1), ping(2)]);
  const [e] = await messages(r).catch(() => []);
  check("pml serve: a batch on 2025-06-18 is refused with -32600", r.status === 400 && e?.error?.code === -32600 && /2025-06-18/.test(e?.error?.message), `HTTP ${r.status} ${JSON.stringify(e)}`);
  // The session's revision decides, not the header (issue 50).
  const s3 = await session("2025-11-25");
  const r3 = await s3.post([ping(1), ping(2)], { "mcp-protocol-version": undefined });
  const [e3] = await messages(r3).catch(() => []);
  check("pml serve: a batch on 2025-11-25 without MCP-Protocol-Version is refused with -32600", r3.status === 400 && e3?.error?.code === -32600, `HTTP ${r3.status} ${JSON.stringify(e3)}`);
}

// stdio: pml stdio on revision v; the answer to one line.
async function stdio(v, line) {
  const p = spawn(pml, ["stdio"], { stdio: ["pipe", "pipe", "ignore"] });
  const lines = readline.createInterface({ input: p.stdout })[Symbol.asyncIterator]();
  const next = async () => {
    const t = setTimeout(() => p.kill(), 30000);
    const { value } = await lines.next();
    clearTimeout(t);
    return value;
  };
  p.stdin.write(JSON.stringify(init(v)) + "\n");
  await next();
  p.stdin.write(JSON.stringify(initialized) + "\n" + line + "\n");
  const answer = await next();
  p.stdin.end();
  await new Promise((res) => p.on("exit", res));
  return answer ? JSON.parse(answer) : undefined;
}
{
  const a = await stdio("2025-03-26", JSON.stringify([ping(1), note, ping(2)]));
  check("pml stdio: a batch on 2025-03-26 is answered with an array", Array.isArray(a) && a.length === 2 && a.every((m) => m.result), JSON.stringify(a));
  const b = await stdio("2025-06-18", JSON.stringify([ping(1), ping(2)]));
  check("pml stdio: a batch on 2025-06-18 is refused with -32600", b?.error?.code === -32600 && /2025-06-18/.test(b?.error?.message), JSON.stringify(b));
  const c = await stdio("2025-11-25", JSON.stringify({ jsonrpc: "2.0", id: 3, method: "foo/bar" }));
  check("pml stdio: an unknown method gets -32601", c?.id === 3 && c?.error?.code === -32601, JSON.stringify(c));
}
process.exit(failed);
