import type { Lease, LeaseFigures, LeaseTableScan, WorkerRecord } from '@kcl/core';
import {
  decodeLeaseFigures,
  LEASE_FIGURES_METADATA_KEY,
  LEASE_RENEW_INTERVAL_METADATA_KEY,
  shardIdOfLeaseKey,
} from '@kcl/core';
import {
  auditHashRangeCoverage,
  formatHashKeyRange,
  parentLeaseKeysOf,
  streamIdentifierOfLeaseKey,
} from '@kcl/shard-graph';
import { RESET_OWNER } from '../operations/reset-leases.js';
import type { StreamPresence } from './stream-presence.js';

/** How old a worker's heartbeat may be when it does not publish its renew interval: the default lease expiry. */
export const DEFAULT_WORKER_EXPIRY_MS = 45_001;

/** What a heartbeat's age may exceed twice the worker's renew interval by: clocks of machines differ. */
export const CLOCK_SKEW_ALLOWANCE_MS = 15_000;

/**
 * - `owned`: a live worker holds the lease.
 * - `handing-off`: its owner is handing it to another worker.
 * - `expired`: its owner has no recent heartbeat (stopped, crashed or stuck): another worker takes it
 *   once the lease expires.
 * - `unowned`: nobody holds it (free to take).
 * - `waiting`: nobody holds it, and a parent shard is not finished yet (it starts after them).
 * - `finished`: read to its end (SHARD_END); kept until cleanup.
 */
export type ShardState = 'owned' | 'handing-off' | 'expired' | 'unowned' | 'waiting' | 'finished';

export interface ShardStatus {
  readonly leaseKey: string;
  readonly shardId: string;
  /** The stream in a multi-stream application; null for the application's only stream. */
  readonly streamIdentifier: string | null;
  readonly state: ShardState;
  readonly owner: string | null;
  readonly leaseCounter: number;
  readonly checkpoint: string;
  /** The owner's last published lag; null when unknown (no owner, or no batch read yet). */
  readonly millisBehindLatest: number | null;
  readonly recordsPerSecond: number | null;
  readonly bytesPerSecond: number | null;
  readonly lastCheckpointAt: string | null;
  readonly parentLeaseKeys: readonly string[];
  readonly childLeaseKeys: readonly string[];
  readonly handoff: { readonly from: string; readonly to: string } | null;
}

export interface WorkerStatus {
  readonly workerId: string;
  readonly lastHeartbeatAt: string;
  /** How long ago its last heartbeat was written, by the writer's clock against this reader's. */
  readonly heartbeatAgeMs: number;
  /** The registry's heartbeat counter: it moves with every heartbeat. */
  readonly heartbeat: number;
  /**
   * Its heartbeat is younger than its expiry (`expiryMs`). Judged by its wall clock against this
   * reader's: a view, and the basis of the operations' refusals, never of an unfenced write.
   */
  readonly alive: boolean;
  /**
   * The heartbeat age past which it is taken as gone: `--worker-expiry-ms` when given; else twice the
   * renew interval it publishes plus `CLOCK_SKEW_ALLOWANCE_MS`; else `DEFAULT_WORKER_EXPIRY_MS`.
   */
  readonly expiryMs: number;
  readonly startedAt: string | null;
  /** The leases the lease table says it holds. */
  readonly leases: readonly string[];
  readonly recordsPerSecond: number;
  readonly bytesPerSecond: number;
  /** Leases whose figures did not fit in its registry entry. */
  readonly figuresOmitted: number;
  /**
   * It publishes per-lease figures (`LEASE_FIGURES_METADATA_KEY`). A worker that does not runs a
   * version from before them, which cannot read an AT_TIMESTAMP checkpoint carrying its own time.
   */
  readonly publishesLeaseFigures: boolean;
}

export type ProblemKind =
  | 'expired-lease'
  | 'unowned-shard'
  | 'handoff-in-progress'
  | 'hash-range-hole'
  | 'unreadable-lease'
  | 'unknown-owner'
  | 'deleted-stream';

export interface StatusProblem {
  readonly kind: ProblemKind;
  /** The lease concerned, when there is one. */
  readonly leaseKey: string | null;
  readonly message: string;
}

export interface ApplicationStatus {
  readonly applicationName: string;
  readonly store: string;
  readonly readAt: string;
  readonly shards: readonly ShardStatus[];
  readonly workers: readonly WorkerStatus[];
  /**
   * Owners of leases that are not in the worker registry at all (a Java KCL worker does not register;
   * nor does a worker of another implementation): nothing tells whether they are live, so the
   * operations treat them as live unless `--force`. The placeholder owner of an interrupted reset is
   * not one of them.
   */
  readonly unregisteredOwners: readonly string[];
  readonly problems: readonly StatusProblem[];
}

export interface StatusInput {
  readonly applicationName: string;
  readonly store: string;
  readonly scan: LeaseTableScan;
  readonly workers: readonly WorkerRecord[];
  /** The reader's wall clock. */
  readonly now: number;
  /**
   * A worker whose last heartbeat is older than this is taken as gone, whatever it publishes; absent:
   * per worker, twice its published renew interval plus `CLOCK_SKEW_ALLOWANCE_MS`, or
   * `DEFAULT_WORKER_EXPIRY_MS` for a worker that does not publish it.
   */
  readonly workerExpiryMs?: number;
  /** Whether the streams of the leases still exist, when Kinesis was asked (`checkStreamPresence`). */
  readonly streams?: readonly StreamPresence[];
}

/**
 * What an operator sees of an application: its shards (owner, checkpoint, lag, state, lineage), its
 * workers (heartbeat, leases, throughput) and what looks wrong. Pure: the caller reads the store.
 *
 * A worker's liveness is judged from its registry entry's `lastHeartbeatAt` (the worker's wall
 * clock): heartbeats come every lease renew interval, which a worker publishes in its metadata, so a
 * worker silent for longer than twice that interval plus a clock-skew allowance is taken as gone (see
 * `WorkerStatus.expiryMs`). Clock skew beyond the allowance shifts that judgement; the operations
 * fence their writes with the lease counter all the same.
 */
export function applicationStatus(input: StatusInput): ApplicationStatus {
  const { now, workerExpiryMs } = input;
  const leases = input.scan.leases;
  const figuresByLease = new Map<string, LeaseFigures>();
  const workers = new Map<string, WorkerRecord>();
  for (const record of input.workers) {
    workers.set(record.workerId, record);
    for (const figures of decodeLeaseFigures(record.metadata[LEASE_FIGURES_METADATA_KEY])?.leases ?? []) {
      // Only the owner's figures count: a worker that lost a lease may still list it until its next heartbeat.
      figuresByLease.set(`${record.workerId}\u0000${figures.leaseKey}`, figures);
    }
  }
  const alive = (workerId: string): boolean => {
    const record = workers.get(workerId);
    return record !== undefined && now - record.lastHeartbeatAt.getTime() <= expiryOf(record, workerExpiryMs);
  };
  const byKey = new Map(leases.map((lease) => [lease.leaseKey, lease]));
  const children = new Map<string, string[]>();
  for (const lease of leases) {
    for (const parent of parentLeaseKeysOf(lease)) {
      const list = children.get(parent) ?? [];
      list.push(lease.leaseKey);
      children.set(parent, list);
    }
  }

  const problems: StatusProblem[] = [];
  const shards = leases.map((lease): ShardStatus => {
    const parents = parentLeaseKeysOf(lease);
    const state = shardState(lease, parents, byKey, alive);
    const figures =
      lease.owner === null ? undefined : figuresByLease.get(`${lease.owner}\u0000${lease.leaseKey}`);
    const childKeys = new Set(children.get(lease.leaseKey) ?? []);
    const stream = lease.streamIdentifier ?? streamIdentifierOfLeaseKey(lease.leaseKey) ?? null;
    for (const child of lease.childShardIds) childKeys.add(stream === null ? child : `${stream}:${child}`);
    problems.push(...shardProblems(lease, state, workers));
    return {
      leaseKey: lease.leaseKey,
      shardId: shardIdOfLeaseKey(lease.leaseKey),
      streamIdentifier: stream,
      state,
      owner: lease.owner,
      leaseCounter: lease.leaseCounter,
      checkpoint: lease.checkpoint.toString(),
      millisBehindLatest: state === 'finished' ? 0 : (figures?.millisBehindLatest ?? null),
      // A gone owner's last rates are not its rates now; its last lag is still the best known.
      recordsPerSecond: state === 'expired' ? null : (figures?.recordsPerSecond ?? null),
      bytesPerSecond: state === 'expired' ? null : (figures?.bytesPerSecond ?? null),
      lastCheckpointAt: figures?.lastCheckpointAt?.toISOString() ?? null,
      parentLeaseKeys: parents,
      childLeaseKeys: [...childKeys].sort(),
      handoff: lease.handoff === null ? null : { from: lease.handoff.from, to: lease.handoff.to },
    };
  });

  for (const row of input.scan.unreadable) {
    problems.push({
      kind: 'unreadable-lease',
      leaseKey: row.leaseKey,
      message: `lease ${row.leaseKey} cannot be read (${row.problem}); workers skip it`,
    });
  }
  problems.push(...coverageProblems(leases));
  problems.push(...streamProblems(leases, input.streams ?? []));

  const workerStatuses = [...workers.values()]
    .sort((a, b) => a.workerId.localeCompare(b.workerId))
    .map((record): WorkerStatus => {
      const published = decodeLeaseFigures(record.metadata[LEASE_FIGURES_METADATA_KEY]);
      const held = leases.filter((lease) => lease.owner === record.workerId).map((lease) => lease.leaseKey);
      const heldSet = new Set(held);
      const mine = alive(record.workerId)
        ? (published?.leases ?? []).filter((figures) => heldSet.has(figures.leaseKey))
        : [];
      return {
        workerId: record.workerId,
        lastHeartbeatAt: record.lastHeartbeatAt.toISOString(),
        heartbeatAgeMs: Math.max(0, now - record.lastHeartbeatAt.getTime()),
        heartbeat: record.heartbeat,
        alive: alive(record.workerId),
        expiryMs: expiryOf(record, workerExpiryMs),
        startedAt: record.metadata.startedAt ?? null,
        leases: held,
        recordsPerSecond: sum(mine.map((figures) => figures.recordsPerSecond)),
        bytesPerSecond: sum(mine.map((figures) => figures.bytesPerSecond)),
        figuresOmitted: published?.omitted ?? 0,
        publishesLeaseFigures: record.metadata[LEASE_FIGURES_METADATA_KEY] !== undefined,
      };
    });

  return {
    applicationName: input.applicationName,
    store: input.store,
    readAt: new Date(now).toISOString(),
    shards,
    workers: workerStatuses,
    unregisteredOwners: [
      ...new Set(
        leases.flatMap((lease) =>
          lease.owner === null || lease.owner === RESET_OWNER || workers.has(lease.owner)
            ? []
            : [lease.owner],
        ),
      ),
    ].sort(),
    problems,
  };
}

/** The heartbeat age past which `record`'s worker is taken as gone (see `WorkerStatus.expiryMs`). */
export function expiryOf(record: WorkerRecord, workerExpiryMs: number | undefined): number {
  if (workerExpiryMs !== undefined) return workerExpiryMs;
  const published = record.metadata[LEASE_RENEW_INTERVAL_METADATA_KEY];
  const interval = published === undefined || !/^[0-9]{1,9}$/.test(published) ? 0 : Number(published);
  return interval > 0 ? 2 * interval + CLOCK_SKEW_ALLOWANCE_MS : DEFAULT_WORKER_EXPIRY_MS;
}

function shardState(
  lease: Lease,
  parents: readonly string[],
  byKey: ReadonlyMap<string, Lease>,
  alive: (workerId: string) => boolean,
): ShardState {
  if (lease.checkpoint.isShardEnd) return 'finished';
  if (lease.owner === null) {
    const waiting = parents.some((parent) => {
      const parentLease = byKey.get(parent);
      return parentLease !== undefined && !parentLease.checkpoint.isShardEnd;
    });
    return waiting ? 'waiting' : 'unowned';
  }
  if (!alive(lease.owner)) return 'expired';
  return lease.handoff === null ? 'owned' : 'handing-off';
}

function shardProblems(
  lease: Lease,
  state: ShardState,
  workers: ReadonlyMap<string, WorkerRecord>,
): StatusProblem[] {
  const leaseKey = lease.leaseKey;
  switch (state) {
    case 'expired':
      return [
        workers.has(lease.owner as string)
          ? {
              kind: 'expired-lease',
              leaseKey,
              message: `lease ${leaseKey} is held by ${lease.owner}, whose heartbeat is old: another worker takes it when it expires (kcl release --worker ${lease.owner} hands it back now)`,
            }
          : {
              kind: 'unknown-owner',
              leaseKey,
              message: `lease ${leaseKey} is held by ${lease.owner}, which is not in the worker registry (a worker that does not register, such as a Java KCL worker, or one stopped or crashed): another worker takes it when it expires; the kcl operations treat it as live unless --force`,
            },
      ];
    case 'unowned':
      return [
        {
          kind: 'unowned-shard',
          leaseKey,
          message: `shard ${leaseKey} has no owner: no worker is reading it (are workers running?)`,
        },
      ];
    case 'handing-off':
      return [
        {
          kind: 'handoff-in-progress',
          leaseKey,
          message: `lease ${leaseKey} is being handed from ${lease.handoff?.from} to ${lease.handoff?.to}`,
        },
      ];
    default:
      return [];
  }
}

/** Holes in the hash key space of each stream's unfinished leases (records there are read by nobody). */
function coverageProblems(leases: readonly Lease[]): StatusProblem[] {
  const byStream = new Map<string, Lease[]>();
  for (const lease of leases) {
    const stream = lease.streamIdentifier ?? streamIdentifierOfLeaseKey(lease.leaseKey) ?? '';
    const list = byStream.get(stream) ?? [];
    list.push(lease);
    byStream.set(stream, list);
  }
  const problems: StatusProblem[] = [];
  for (const [stream, streamLeases] of byStream) {
    const audit = auditHashRangeCoverage(streamLeases);
    if (audit.status !== 'holes') continue;
    for (const hole of audit.holes) {
      problems.push({
        kind: 'hash-range-hole',
        leaseKey: null,
        message: `${stream === '' ? 'the stream' : `stream ${stream}`}: no unfinished lease covers hash keys ${formatHashKeyRange(hole)} (a shard without a lease: workers create it at their next shard sync)`,
      });
    }
  }
  return problems;
}

/** Leases of streams that no longer exist: nobody reads them again; `kcl forget-stream` removes them. */
function streamProblems(leases: readonly Lease[], streams: readonly StreamPresence[]): StatusProblem[] {
  return streams
    .filter((entry) => entry.presence === 'deleted' || entry.presence === 'recreated')
    .map((entry) => {
      const count = leases.filter((lease) => streamOf(lease) === entry.stream).length;
      return {
        kind: 'deleted-stream' as const,
        leaseKey: null,
        message: `stream ${entry.stream} ${entry.presence === 'deleted' ? 'no longer exists' : 'was deleted (a stream of that name was created again since)'}; ${count} of its leases remain: kcl forget-stream --stream ${entry.stream} removes them`,
      };
    });
}

function streamOf(lease: Lease): string | null {
  return lease.streamIdentifier ?? streamIdentifierOfLeaseKey(lease.leaseKey) ?? null;
}

function sum(values: readonly number[]): number {
  return Math.round(values.reduce((total, value) => total + value, 0) * 10) / 10;
}
