// The reference server's modern form on stdio (written here, not copied):
// its hand-written MCP 2026-07-28 path (app.post in everything-server.ts)
// exists only in its Streamable HTTP form, so this starts that form
// (server.mjs) on the container's loopback (containers run with no
// network but lo) and carries JSON-RPC lines between stdin/stdout and it:
// each request a POST with the headers the modern path checks (the
// MCP-Protocol-Version its _meta names), its answer (JSON, JSON lines or
// an SSE stream) written back a line a message, as it comes, so a
// subscriptions/listen stream stays open and its notifications flow. A
// notifications/cancelled ends the request it names. pml runs it with
// "protocol": "2026-07-28" (../reference.sh).
import { spawn } from 'node:child_process';
import http from 'node:http';
import readline from 'node:readline';

const port = 3737;
// The HTTP form logs with console.log: its stdout goes to our stderr.
const child = spawn(process.execPath, [new URL('./server.mjs', import.meta.url).pathname], {
  env: { ...process.env, PORT: String(port) },
  stdio: ['ignore', 2, 2]
});
child.on('exit', (code) => process.exit(code ?? 1));
process.on('exit', () => child.kill());

const out = (msg) => process.stdout.write(JSON.stringify(msg) + '\n');

async function ready() {
  for (let i = 0; i < 200; i++) {
    const ok = await new Promise((resolve) => {
      const s = http.get({ host: '127.0.0.1', port, path: '/' }, (r) => { r.resume(); resolve(true); });
      s.on('error', () => resolve(false));
    });
    if (ok) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error('the reference server did not start on loopback');
}

const inflight = new Map(); // JSON id → the request's http.ClientRequest

function post(msg) {
  const body = JSON.stringify(msg);
  const version = msg?.params?._meta?.['io.modelcontextprotocol/protocolVersion'];
  const headers = {
    'Content-Type': 'application/json',
    Accept: 'application/json, text/event-stream',
    'Content-Length': Buffer.byteLength(body)
  };
  if (version) headers['MCP-Protocol-Version'] = version;
  const hasId = msg.id !== undefined && msg.id !== null;
  const req = http.request({ host: '127.0.0.1', port, path: '/mcp', method: 'POST', headers }, (res) => {
    const sse = String(res.headers['content-type'] || '').startsWith('text/event-stream');
    let buf = '';
    const take = (final) => {
      if (sse) {
        let i;
        while ((i = buf.indexOf('\n\n')) >= 0) {
          const event = buf.slice(0, i);
          buf = buf.slice(i + 2);
          const data = event.split('\n').filter((l) => l.startsWith('data:')).map((l) => l.slice(5).trimStart()).join('\n');
          if (data) emit(data);
        }
      } else {
        let i;
        while ((i = buf.indexOf('\n')) >= 0) {
          const line = buf.slice(0, i);
          buf = buf.slice(i + 1);
          if (line.trim()) emit(line);
        }
        if (final && buf.trim()) {
          emit(buf);
          buf = '';
        }
      }
    };
    res.setEncoding('utf8');
    res.on('data', (chunk) => { buf += chunk; take(false); });
    res.on('end', () => { take(true); if (hasId) inflight.delete(msg.id); });
  });
  req.on('error', (e) => {
    if (hasId && inflight.has(msg.id)) {
      inflight.delete(msg.id);
      out({ jsonrpc: '2.0', id: msg.id, error: { code: -32603, message: `the reference server: ${e.message}` } });
    }
  });
  if (hasId) inflight.set(msg.id, req);
  req.end(body);
}

function emit(text) {
  try {
    out(JSON.parse(text));
  } catch {
    process.stderr.write(`modern.mjs: not JSON from the reference server: ${text}\n`);
  }
}

await ready();
const rl = readline.createInterface({ input: process.stdin });
rl.on('line', (line) => {
  if (!line.trim()) return;
  let msg;
  try {
    msg = JSON.parse(line);
  } catch {
    return;
  }
  if (msg.method === 'notifications/cancelled') {
    const req = inflight.get(msg.params?.requestId);
    if (req) {
      inflight.delete(msg.params.requestId);
      req.destroy();
    }
    return;
  }
  if (msg.method === undefined) return; // an answer: the modern path sends no requests
  post(msg);
});
rl.on('close', () => process.exit(0));
