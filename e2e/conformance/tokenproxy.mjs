// A loopback proxy that adds pml serve's bearer token to every request and
// changes nothing else (method, path, headers, body, the streamed answer).
// The conformance suite (0.1.16) takes only a URL and cannot send headers;
// pml serve refuses every request without the token.
//
//   node tokenproxy.mjs TARGET_URL   (PML_SERVE_TOKEN in the environment)
//
// It listens on a free loopback port and prints "listening PORT" on stdout.
import http from "node:http";

const target = new URL(process.argv[2]);
const token = process.env.PML_SERVE_TOKEN;
if (!token) {
  console.error("tokenproxy: PML_SERVE_TOKEN is not set");
  process.exit(2);
}

const server = http.createServer((req, res) => {
  // The Host header is passed as it came: the suite's DNS-rebinding
  // scenario sends a foreign one, which pml must refuse.
  const headers = { ...req.headers, authorization: `Bearer ${token}` };
  const up = http.request(
    { host: target.hostname, port: target.port, method: req.method, path: req.url, headers },
    (r) => {
      res.writeHead(r.statusCode, r.rawHeaders);
      // Streamed as it comes: SSE events must not wait for the end.
      r.pipe(res);
    },
  );
  up.on("error", (err) => {
    if (!res.headersSent) {
      res.writeHead(502, { "content-type": "text/plain" });
    }
    res.end(`tokenproxy: pml serve did not answer: ${err.message}\n`);
  });
  // A client that goes away ends the request to pml too.
  res.on("close", () => up.destroy());
  req.pipe(up);
});

server.listen(0, "127.0.0.1", () => {
  console.log(`listening ${server.address().port}`);
});
