// Package execute runs capability code (TypeScript) in a locked-down Deno
// container and turns every `mcp.*` call the code makes into an event the
// broker answers.
//
// # Isolation
//
// The code runs in the pml/deno image (images/deno/build.sh) as
//
//	deno run --no-prompt --no-remote --no-npm --no-config --no-lock \
//	  --v8-flags=--max-old-space-size=N data:application/typescript;base64,<runner.ts>
//
// with no --allow-* flag, so Deno's own sandbox denies every file, network,
// environment, subprocess and system call (NotCapable), and under it the
// container has network "none", a read-only root filesystem, a tmpfs /tmp
// (Deno's cache, DENO_DIR=/tmp/deno), no mount of the host at all, no
// capabilities, a non-root user and the policy's pids, memory and CPU
// limits. A Runner enforces network none, the read-only rootfs and the
// tmpfs whatever policy it is given.
//
// Why the runner travels as a data: URL on the command line rather than
// baked into the image: the image then holds only the Deno runtime (the same
// binary as the upstream denoland/deno image, which a host that can pull may
// use instead), the runner always matches the pml that runs it, no image tag
// has to follow runner.ts, and Deno needs no --allow-read to load it. Its
// size (about 15 KB in base64) is far below argument limits. `deno run -`
// (the program on stdin) was not an option: stdin carries the protocol.
//
// Why the code travels as the first message on stdin rather than in a file
// or an argument: the root filesystem stays read-only, nothing needs write
// permission, and code of any size fits (arguments are limited). The runner
// imports it as a data: URL: Deno checks a dynamically imported module
// against the program's permissions (none), whereas the main module's own
// import graph is loaded with full rights, so the code is never part of
// the main module.
//
// # Protocol
//
// Newline-delimited JSON-RPC 2.0 over the container's stdin (pml → runner)
// and stdout (runner → pml). The code's console output goes to stderr, of
// which pml keeps the last lines for error messages.
//
//  1. pml sends the program as a notification, the first line on stdin:
//
//     {"jsonrpc":"2.0","method":"pml/run","params":{"code":"…"}}
//
//     The code is the body of an async function: it may await and return.
//     Instead of "code", "module" (an ES module's source), "export" (the name
//     of an exported function) and "args" (its one argument) run a function
//     of a module; with no "export" the result is the sorted list of the
//     module's exported function names.
//
//  2. Each mcp.<namespace>.<action>(args) in the code is a request:
//
//     {"jsonrpc":"2.0","id":N,"method":"tools/call","params":{"name":"namespace:action","arguments":{…}}}
//
//     Ids are positive integers; several calls may be outstanding
//     (Promise.all) and pml answers them in any order, at any later time:
//
//     {"jsonrpc":"2.0","id":N,"result":<MCP CallToolResult>}
//     {"jsonrpc":"2.0","id":N,"error":{"code":-32000,"message":"…"}}
//
//     The promise resolves to the result's structuredContent when present,
//     else to its text contents joined with "\n". A result with isError, or
//     an error answer, rejects with an Error (name "ToolError") whose
//     message is the result's text (or the error's message), and is recorded
//     in tool_failures whether or not the code catches it.
//
//  3. When the code's function settles, the runner sends a notification and
//     exits:
//
//     {"jsonrpc":"2.0","method":"pml/done","params":{"status":"success","result":<JSON>,"tool_failures":[{"tool":"fs:read","error":"…"}]}}
//     {"jsonrpc":"2.0","method":"pml/done","params":{"status":"error","result":null,"error":"NotCapable: Requires read access to …","tool_failures":[]}}
//
//     status is "error" when the code threw (or an uncaught exception or
//     rejection ended it, as it would end a Deno program); a return value
//     JSON cannot hold is an error too. A returned undefined is null.
//     Calls still unanswered when the code returns are abandoned: pml does
//     not deliver them.
//
// Lines on stdout that are not JSON are not protocol; pml keeps them with
// stderr and otherwise ignores them. Requests for other methods are
// answered with a JSON-RPC error.
package execute
