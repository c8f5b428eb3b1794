/**
 * A separate process holding one worker session, for the conformance case that kills it with SIGKILL:
 * attaches the session, writes `attached` and waits to be killed. Run with `node --import tsx`.
 */
import { Kysely, MysqlDialect, PostgresDialect } from 'kysely';
import { createPool } from 'mysql2';
import pg from 'pg';
import type { AnyKysely } from '../src/index.js';
import { createSqlLeaseStore } from '../src/index.js';

const [flavor, location, applicationName, workerId] = process.argv.slice(2);
if (location === undefined || applicationName === undefined || workerId === undefined) {
  throw new Error('usage: session-holder.ts <postgres|mysql> <url> <applicationName> <workerId>');
}

function open(location: string): AnyKysely {
  if (flavor === 'postgres') {
    const pool = new pg.Pool({ connectionString: location, max: 2 });
    pool.on('connect', (client) => client.on('error', () => undefined));
    pool.on('error', () => undefined);
    return new Kysely({ dialect: new PostgresDialect({ pool }) });
  }
  return new Kysely({
    dialect: new MysqlDialect({ pool: createPool({ uri: location, connectionLimit: 2 }) }),
  });
}

const store = createSqlLeaseStore({ db: open(location), applicationName, sessionLiveness: true });
const session = await store.workers.attachSession?.(workerId);
if (session === undefined) throw new Error('the store has no sessions');
process.stdout.write('attached\n');
// The held connection keeps the process alive until it is killed.
