import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { KinesisClient } from '@aws-sdk/client-kinesis';
import type { Clock, LeaseStore } from '@kcl/core';
import { systemClock } from '@kcl/core';
import type { ApplicationStatus, ShardStatus } from '../status/application-status.js';
import { readApplicationStatus } from '../status/read-application-status.js';
import { StreamPresenceCache } from '../status/stream-presence.js';
import { DASHBOARD_PAGE } from './dashboard-page.js';
import { HeartbeatWatch } from './heartbeat-watch.js';
import { diffLeaseEvents, type LeaseEvent } from './lease-events.js';

export interface DashboardOptions {
  readonly store: LeaseStore;
  /** Default 8080; 0 picks a free port. */
  readonly port?: number;
  /** Default 127.0.0.1: the page is for this machine. */
  readonly host?: string;
  /** How often the store is read (default 2,000 ms). */
  readonly intervalMs?: number;
  readonly workerExpiryMs?: number;
  /** Reads kept for the sparklines (default 150). */
  readonly historyLength?: number;
  readonly clock?: Clock;
  /**
   * Checks that the leases' streams still exist (see `readApplicationStatus`); each stream's answer is
   * kept for a minute (`StreamPresenceCache`).
   */
  readonly kinesis?: Pick<KinesisClient, 'send'>;
  /** Stops the dashboard. */
  readonly signal?: AbortSignal;
}

/** A lease the dashboard saw deleted, as it was last read. */
export interface RetiredShard extends ShardStatus {
  readonly deletedAt: string;
}

/** One read, for the sparklines. */
export interface DashboardSample {
  readonly at: string;
  /** MillisBehindLatest per lease (null: unknown). */
  readonly lag: Readonly<Record<string, number | null>>;
  /** Records per second per worker. */
  readonly throughput: Readonly<Record<string, number>>;
}

/** What the page fetches from `/api/state`. */
export interface DashboardState {
  readonly status: ApplicationStatus | null;
  readonly history: readonly DashboardSample[];
  /** Newest last. */
  readonly events: readonly LeaseEvent[];
  /**
   * Leases deleted from the table in the last `retiredShardsMs` (finished parents that lease cleanup
   * removed once their children started), as last read: the lineage graph keeps them, faded.
   */
  readonly retiredShards: readonly RetiredShard[];
  /** The last read's failure, or null. */
  readonly error: string | null;
  readonly intervalMs: number;
}

export interface RunningDashboard {
  readonly url: string;
  /** The state the page shows now. */
  state(): DashboardState;
  /** Stops reading and closes the server. Idempotent. */
  stop(): Promise<void>;
}

const MAX_EVENTS = 500;
/** How long, and how many, deleted leases stay in the lineage graph. */
const RETIRED_SHARDS_MS = 5 * 60_000;
const MAX_RETIRED_SHARDS = 64;

/**
 * Serves the lease dashboard: a read-only page (plain HTML, JavaScript and SVG, no build step) and the
 * JSON it polls. The store is read every `intervalMs`; lease events come from comparing successive reads.
 */
export async function startDashboard(options: DashboardOptions): Promise<RunningDashboard> {
  const clock = options.clock ?? systemClock;
  const intervalMs = options.intervalMs ?? 2_000;
  const historyLength = options.historyLength ?? 150;
  const stopping = new AbortController();
  const unlink = linkAbort(options.signal, stopping);
  let status: ApplicationStatus | null = null;
  let error: string | null = null;
  const history: DashboardSample[] = [];
  const events: LeaseEvent[] = [];
  let retiredShards: RetiredShard[] = [];
  const watch = new HeartbeatWatch(intervalMs);
  const streamPresence =
    options.kinesis === undefined
      ? undefined
      : new StreamPresenceCache(options.kinesis, () => clock.monotonicNow());

  const read = async (): Promise<void> => {
    try {
      const next = await readApplicationStatus(options.store, {
        ...(options.workerExpiryMs === undefined ? {} : { workerExpiryMs: options.workerExpiryMs }),
        now: () => clock.now(),
        ...(streamPresence === undefined ? {} : { streamPresence }),
      });
      const previous = status;
      const aliveBefore = new Set(
        previous?.workers.map((worker) => worker.workerId).filter((id) => watch.alive(id)),
      );
      watch.observe(next.workers, clock.monotonicNow());
      if (previous !== null) {
        events.push(
          ...diffLeaseEvents(previous, next, {
            before: (workerId) => aliveBefore.has(workerId),
            after: (workerId) => watch.alive(workerId),
          }),
        );
      }
      if (events.length > MAX_EVENTS) events.splice(0, events.length - MAX_EVENTS);
      if (previous !== null) {
        const present = new Set(next.shards.map((shard) => shard.leaseKey));
        const deleted = previous.shards
          .filter((shard) => !present.has(shard.leaseKey))
          .map((shard) => ({ ...shard, deletedAt: next.readAt }));
        const horizon = Date.parse(next.readAt) - RETIRED_SHARDS_MS;
        retiredShards = [...retiredShards, ...deleted]
          .filter((shard) => !present.has(shard.leaseKey) && Date.parse(shard.deletedAt) >= horizon)
          .slice(-MAX_RETIRED_SHARDS);
      }
      history.push(sampleOf(next));
      if (history.length > historyLength) history.shift();
      status = next;
      error = null;
    } catch (failure) {
      error = failure instanceof Error ? failure.message : String(failure);
    }
  };
  const state = (): DashboardState => ({ status, history, events, retiredShards, error, intervalMs });

  await read();
  const loop = (async () => {
    while (!stopping.signal.aborted) {
      await clock.sleep(intervalMs, stopping.signal);
      if (!stopping.signal.aborted) await read();
    }
  })();

  let allowedHosts: ReadonlySet<string> | null = null;
  const server = createServer((request, response) => {
    // Bound to loopback, only this machine's names are answered: a page elsewhere whose name was made
    // to resolve to 127.0.0.1 (DNS rebinding) sends its own name as Host, and must not read the state.
    if (allowedHosts !== null && !allowedHosts.has((request.headers.host ?? '').toLowerCase())) {
      response.writeHead(421, { 'content-type': 'text/plain' }).end('misdirected request: unknown Host');
      return;
    }
    respond(request, response, state);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 8080, options.host ?? '127.0.0.1', () => resolve());
  });
  const address = server.address() as AddressInfo;
  allowedHosts = isLoopback(address.address) ? loopbackHosts(address.port) : null;
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  let stopped: Promise<void> | null = null;
  return {
    url: `http://${host}:${address.port}/`,
    state,
    stop() {
      stopped ??= (async () => {
        stopping.abort();
        unlink();
        await loop;
        server.closeAllConnections();
        await new Promise<void>((resolve) => server.close(() => resolve()));
      })();
      return stopped;
    },
  };
}

function respond(request: IncomingMessage, response: ServerResponse, state: () => DashboardState): void {
  const path = (request.url ?? '/').split('?')[0];
  if (request.method !== 'GET') {
    response.writeHead(405, { allow: 'GET' }).end();
    return;
  }
  if (path === '/' || path === '/index.html') {
    response.writeHead(200, { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-store' });
    response.end(DASHBOARD_PAGE);
    return;
  }
  if (path === '/api/state') {
    response.writeHead(200, { 'content-type': 'application/json', 'cache-control': 'no-store' });
    response.end(JSON.stringify(state()));
    return;
  }
  response.writeHead(404, { 'content-type': 'text/plain' }).end('not found');
}

function isLoopback(address: string): boolean {
  return address === '::1' || address.startsWith('127.') || address === '::ffff:127.0.0.1';
}

/** The Host headers a browser on this machine sends to the loopback port (the port omitted at 80). */
function loopbackHosts(port: number): ReadonlySet<string> {
  const names = ['localhost', '127.0.0.1', '[::1]'];
  return new Set([...names.map((name) => `${name}:${port}`), ...(port === 80 ? names : [])]);
}

function sampleOf(status: ApplicationStatus): DashboardSample {
  const lag: Record<string, number | null> = {};
  for (const shard of status.shards) lag[shard.leaseKey] = shard.millisBehindLatest;
  const throughput: Record<string, number> = {};
  for (const worker of status.workers) throughput[worker.workerId] = worker.recordsPerSecond;
  return { at: status.readAt, lag, throughput };
}

function linkAbort(from: AbortSignal | undefined, to: AbortController): () => void {
  if (from === undefined) return () => undefined;
  if (from.aborted) {
    to.abort();
    return () => undefined;
  }
  const abort = (): void => to.abort();
  from.addEventListener('abort', abort, { once: true });
  return () => from.removeEventListener('abort', abort);
}
