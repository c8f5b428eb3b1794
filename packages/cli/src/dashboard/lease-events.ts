import type { ApplicationStatus, ShardStatus } from '../status/application-status.js';

/**
 * - `created`: a new lease (a new shard, or a reshard's children).
 * - `taken`: a free lease, or one whose owner is gone (its lease expired), got an owner.
 * - `stolen`: moved from a live owner to another worker (a rebalance steal).
 * - `handed-off`: moved to the worker a hand-off named.
 * - `released`: its owner gave it up (a graceful stop, or `kcl release`).
 * - `expired`: its owner's heartbeat stopped (the owner crashed or hangs): another worker takes it
 *   once the lease expires.
 * - `ended`: the shard was read to its end (SHARD_END).
 * - `deleted`: the lease was removed (cleanup after its children started, or `kcl forget-stream`).
 */
export type LeaseEventKind =
  | 'created'
  | 'taken'
  | 'stolen'
  | 'handed-off'
  | 'released'
  | 'expired'
  | 'ended'
  | 'deleted';

export interface LeaseEvent {
  readonly at: string;
  readonly kind: LeaseEventKind;
  readonly leaseKey: string;
  /** The owner before, when there was one. */
  readonly from: string | null;
  /** The owner after, when there is one. */
  readonly to: string | null;
}

/** Whether a worker looked alive at the earlier read (`before`) and at the later one (`after`). */
export interface WorkerLiveness {
  before(workerId: string): boolean;
  after(workerId: string): boolean;
}

/**
 * The lease events between two reads of an application, found by comparing them (no store keeps a
 * history): an observer polling every second sees what changed in that second, so a lease that
 * changed hands twice between two reads shows as one move. A move from an owner that is gone by the
 * later read is a take after expiry, from a live one a steal. `liveness` defaults to the reads' own
 * judgement (`WorkerStatus.alive`); the dashboard passes its `HeartbeatWatch`.
 */
export function diffLeaseEvents(
  previous: ApplicationStatus,
  next: ApplicationStatus,
  liveness: WorkerLiveness = registryLiveness(previous, next),
): LeaseEvent[] {
  const at = next.readAt;
  const before = new Map(previous.shards.map((shard) => [shard.leaseKey, shard]));
  const events: LeaseEvent[] = [];
  for (const shard of next.shards) {
    const old = before.get(shard.leaseKey);
    before.delete(shard.leaseKey);
    if (old === undefined) {
      events.push({ at, kind: 'created', leaseKey: shard.leaseKey, from: null, to: shard.owner });
      continue;
    }
    events.push(...shardEvents(at, old, shard, liveness));
  }
  for (const gone of before.values()) {
    events.push({ at, kind: 'deleted', leaseKey: gone.leaseKey, from: gone.owner, to: null });
  }
  return events;
}

function registryLiveness(previous: ApplicationStatus, next: ApplicationStatus): WorkerLiveness {
  const aliveIn = (status: ApplicationStatus) =>
    new Set(status.workers.filter((worker) => worker.alive).map((worker) => worker.workerId));
  const before = aliveIn(previous);
  const after = aliveIn(next);
  return { before: (workerId) => before.has(workerId), after: (workerId) => after.has(workerId) };
}

function shardEvents(
  at: string,
  old: ShardStatus,
  shard: ShardStatus,
  liveness: WorkerLiveness,
): LeaseEvent[] {
  const events: LeaseEvent[] = [];
  const leaseKey = shard.leaseKey;
  if (old.owner !== shard.owner) {
    if (shard.owner === null) {
      events.push({ at, kind: 'released', leaseKey, from: old.owner, to: null });
    } else if (old.owner === null || !liveness.before(old.owner) || !liveness.after(old.owner)) {
      events.push({ at, kind: 'taken', leaseKey, from: old.owner, to: shard.owner });
    } else if (old.handoff?.to === shard.owner) {
      events.push({ at, kind: 'handed-off', leaseKey, from: old.owner, to: shard.owner });
    } else {
      events.push({ at, kind: 'stolen', leaseKey, from: old.owner, to: shard.owner });
    }
  } else if (
    shard.owner !== null &&
    shard.state !== 'finished' &&
    liveness.before(shard.owner) &&
    !liveness.after(shard.owner)
  ) {
    events.push({ at, kind: 'expired', leaseKey, from: shard.owner, to: null });
  }
  if (shard.state === 'finished' && old.state !== 'finished') {
    events.push({ at, kind: 'ended', leaseKey, from: old.owner, to: null });
  }
  return events;
}
