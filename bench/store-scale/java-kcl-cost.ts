import type { AttributeValue } from '@aws-sdk/client-dynamodb';
import { ExtendedSequenceNumber, hashKeyRange, leaseFromInit, MAX_HASH_KEY } from '@kcl/core';
import { encodeLeaseItem } from '@kcl/store-dynamo';
import type { RequestKind } from './request-ledger.js';

/**
 * The Java KCL's lease-table traffic with its default settings, computed from its published intervals
 * (nothing here is measured). Sources: ../shared/reference/kcl-behaviour.md §2.1, §3.1–§3.5 and the
 * configuration table, checked against awslabs/amazon-kinesis-client at 024eb86e ("Prepare for KCL
 * release v3.5.1"): common/CommonCalculations.java, leases/dynamodb/DynamoDBLeaseCoordinator.java,
 * coordinator/assignment/LeaseAssignmentManager.java, leader/DynamoDBLockBasedLeaderDecider.java,
 * coordinator/DeterministicShuffleShardSyncLeaderDecider.java, coordinator/PeriodicShardSyncManager.java,
 * coordinator/DynamicMigrationComponentsInitializer.java and leases/LeaseManagementConfig.java.
 */
export const JAVA_DEFAULTS = {
  failoverTimeMillis: 10_000,
  epsilonMillis: 25,
  /** Renewer: failover / 3 − epsilon, fixed rate: every held lease, one UpdateItem each. */
  renewerIntervalMs: 10_000 / 3 - 25,
  /** 2.x lease taker: (failover + epsilon) × 2, fixed delay: a full Scan by every worker. */
  takerIntervalMs: (10_000 + 25) * 2,
  /** 2.x leader election (deterministic shuffle): every worker lists all leases every 5 minutes. */
  leaderElectionIntervalMs: 5 * 60_000,
  /** Hole audit (PeriodicShardSyncManager, leader only): lists all leases every 2 minutes. */
  leaseRecoveryAuditIntervalMs: 120_000,
  /** 3.x LeaseAssignmentManager (leader only), 2 × failover, fixed delay: Scan of leases and worker metrics. */
  leaseAssignmentIntervalMs: 2 * 10_000,
  /** 3.x lease discovery on every worker: assignment interval / 2 − epsilon, a Query of the owner index. */
  leaseDiscoveryIntervalMs: (2 * 10_000) / 2 - 25,
  /** 3.x worker metrics: every worker writes its stats every 30 s. */
  workerMetricsReportIntervalMs: 30_000,
  /** 3.x leader lock (DynamoDB lock client): heartbeat every 30 s; a "no" is cached that long. */
  leaderLockHeartbeatMs: 30_000,
  /**
   * 3.x: a non-leader reads the lock item when asked after its cached "no" is older than the
   * heartbeat period; the assignment manager asks every 20 s, so every other ask reads: one read per
   * 40 s (an estimate: the shard sync asks too, every 2 minutes).
   */
  leaderLockReadIntervalMs: 40_000,
} as const;

/** DynamoDB returns at most 1 MB of items per Scan or Query page. */
const PAGE_BYTES = 1_048_576;
const HOUR_MS = 3_600_000;

export interface JavaCost {
  /** Requests per lease-hour by kind, and in total. */
  readonly requests: Readonly<Record<RequestKind, number>> & { readonly total: number };
  /** DynamoDB capacity units per lease-hour (eventually consistent reads, the Java KCL's default). */
  readonly readCapacity: number;
  readonly writeCapacity: number;
}

/**
 * The size DynamoDB bills for a held lease in the Java table format, as store-dynamo writes it (the
 * Java KCL's own items carry the same attributes; 3.x adds `throughputKBps`): attribute names plus
 * values, by DynamoDB's item-size rules.
 */
export function javaLeaseItemBytes(): number {
  const lease = {
    ...leaseFromInit({
      leaseKey: 'shardId-000000001234',
      checkpoint: ExtendedSequenceNumber.of('49590338271490256608559692538361571095921575989136588898'),
      hashKeyRange: hashKeyRange(MAX_HASH_KEY / 3n, (MAX_HASH_KEY / 3n) * 2n),
    }),
    owner: 'worker-0123-4f9a8c7e',
    leaseCounter: 123_456,
  };
  const item = encodeLeaseItem(lease);
  return Object.entries(item).reduce((sum, [name, value]) => sum + name.length + valueBytes(value), 0);
}

function valueBytes(value: AttributeValue): number {
  if (value.S !== undefined) return Buffer.byteLength(value.S);
  if (value.N !== undefined) return Math.ceil(value.N.replace(/^[-0.]+|\.?0+$/g, '').length / 2) + 1;
  if (value.SS !== undefined) return value.SS.reduce((sum, entry) => sum + Buffer.byteLength(entry), 0);
  if (value.M !== undefined) {
    return (
      3 + Object.entries(value.M).reduce((sum, [name, inner]) => sum + name.length + valueBytes(inner) + 1, 0)
    );
  }
  if (value.L !== undefined) return 3 + value.L.reduce((sum, inner) => sum + valueBytes(inner) + 1, 0);
  return 1;
}

/** Read units of one page of `bytes`, eventually consistent (0.5 per started 4 KB). */
function readUnits(bytes: number): number {
  return Math.max(1, Math.ceil(bytes / 4_096)) * 0.5;
}

interface ScanCost {
  readonly requests: number;
  readonly readUnits: number;
}

function scan(items: number, itemBytes: number): ScanCost {
  const bytes = items * itemBytes;
  const pages = Math.max(1, Math.ceil(bytes / PAGE_BYTES));
  let units = 0;
  for (let page = 0; page < pages; page++)
    units += readUnits(Math.min(PAGE_BYTES, bytes - page * PAGE_BYTES));
  return { requests: pages, readUnits: units };
}

function perHour(intervalMs: number): number {
  return HOUR_MS / intervalMs;
}

/** Java KCL 2.x: every worker renews its leases every 3.3 s and scans the table every 20 s. */
export function javaKcl2Cost(workers: number, leases: number, itemBytes: number): JavaCost {
  const d = JAVA_DEFAULTS;
  const table = scan(leases, itemBytes);
  const renewsPerLeaseHour = perHour(d.renewerIntervalMs);
  const scansPerHour =
    workers * perHour(d.takerIntervalMs) +
    workers * perHour(d.leaderElectionIntervalMs) +
    perHour(d.leaseRecoveryAuditIntervalMs);
  const list = (scansPerHour * table.requests) / leases;
  const requests = { renew: renewsPerLeaseHour, list, heartbeat: 0, take: 0, liveness: 0, other: 0 };
  return {
    requests: { ...requests, total: renewsPerLeaseHour + list },
    readCapacity: (scansPerHour * table.readUnits) / leases,
    writeCapacity: renewsPerLeaseHour * Math.ceil(itemBytes / 1_024),
  };
}

/**
 * Java KCL 3.x (native 3.x mode, worker-utilization-aware assignment): renewals as in 2.x; the leader
 * alone scans leases and worker metrics every 20 s; every worker queries the owner index every 10 s,
 * writes its metrics every 30 s and reads the leader lock about every 40 s.
 */
export function javaKcl3Cost(workers: number, leases: number, itemBytes: number): JavaCost {
  const d = JAVA_DEFAULTS;
  const table = scan(leases, itemBytes + '"throughputKBps"'.length);
  const workerMetricsBytes = 200;
  const metrics = scan(workers, workerMetricsBytes);
  const renewsPerLeaseHour = perHour(d.renewerIntervalMs);
  const leaderScansPerHour = perHour(d.leaseAssignmentIntervalMs) + perHour(d.leaseRecoveryAuditIntervalMs);
  const discoveriesPerHour = workers * perHour(d.leaseDiscoveryIntervalMs);
  const listRequests =
    leaderScansPerHour * table.requests +
    perHour(d.leaseAssignmentIntervalMs) * metrics.requests +
    discoveriesPerHour;
  const listReadUnits =
    leaderScansPerHour * table.readUnits +
    perHour(d.leaseAssignmentIntervalMs) * metrics.readUnits +
    discoveriesPerHour * readUnits((leases / workers) * 40);
  const heartbeatWrites =
    workers * perHour(d.workerMetricsReportIntervalMs) + perHour(d.leaderLockHeartbeatMs);
  const lockReads = Math.max(0, workers - 1) * perHour(d.leaderLockReadIntervalMs);
  const requests = {
    renew: renewsPerLeaseHour,
    list: listRequests / leases,
    heartbeat: heartbeatWrites / leases,
    take: 0,
    liveness: 0,
    other: lockReads / leases,
  };
  return {
    requests: {
      ...requests,
      total: requests.renew + requests.list + requests.heartbeat + requests.other,
    },
    // The lock item is small: one unit per read (the lock client's reads are taken to be consistent).
    readCapacity: (listReadUnits + lockReads) / leases,
    writeCapacity: (renewsPerLeaseHour * leases * Math.ceil(itemBytes / 1_024) + heartbeatWrites) / leases,
  };
}
