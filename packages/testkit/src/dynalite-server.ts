// Runs dynalite in its own process (started by `startDynalite({ separateProcess: true })`): prints the
// port it listens on as one line, then serves until the parent closes stdin or kills it.
import { once } from 'node:events';
import { createRequire } from 'node:module';
import type { Server } from 'node:net';

const require = createRequire(import.meta.url);
const options = JSON.parse(process.argv[2] ?? '{}') as Record<string, unknown>;
const dynalite = require('dynalite') as (settings: Record<string, unknown>) => Server;
const server = dynalite(options);
server.listen(0, '127.0.0.1');
await once(server, 'listening');
const address = server.address();
process.stdout.write(
  `${JSON.stringify({ port: typeof address === 'object' && address !== null ? address.port : null })}\n`,
);
process.stdin.resume();
process.stdin.on('end', () => process.exit(0));
