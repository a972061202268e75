// The reference server's stdio form: its own createMcpServer() on
// stdin/stdout. build.sh exports createMcpServer from a copy of
// everything-server.ts (the copied file declares it without export).
import './guard.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { createMcpServer } from './everything-server.export.js';

const server = createMcpServer();
const transport = new StdioServerTransport();
transport.onclose = () => process.exit(0);
process.stdin.on('end', () => process.exit(0));
await server.connect(transport);
