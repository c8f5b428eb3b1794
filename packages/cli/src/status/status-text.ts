import { formatTable } from '../cli/cli-io.js';
import type { ApplicationStatus } from './application-status.js';

/** The status as `kcl status` prints it for people. */
export function formatApplicationStatus(status: ApplicationStatus): string {
  const shardRows = status.shards.map((shard) => [
    shard.leaseKey,
    shard.state,
    shard.owner ?? '-',
    shard.checkpoint.length > 24 ? `…${shard.checkpoint.slice(-23)}` : shard.checkpoint,
    formatLag(shard.millisBehindLatest),
    shard.recordsPerSecond === null ? '-' : String(shard.recordsPerSecond),
    shard.parentLeaseKeys.join(',') || '-',
    shard.childLeaseKeys.join(',') || '-',
  ]);
  const workerRows = status.workers.map((worker) => [
    worker.workerId,
    worker.alive ? 'alive' : 'gone',
    `${formatAge(worker.heartbeatAgeMs)} ago`,
    String(worker.leases.length),
    String(worker.recordsPerSecond),
    formatBytes(worker.bytesPerSecond),
  ]);
  const lines = [
    `${status.applicationName} on ${status.store} (read ${status.readAt})`,
    '',
    `Shards (${status.shards.length})`,
    status.shards.length === 0
      ? '  none: no worker has created leases yet'
      : formatTable(
          ['SHARD', 'STATE', 'OWNER', 'CHECKPOINT', 'LAG', 'REC/S', 'PARENTS', 'CHILDREN'],
          shardRows,
        ),
    '',
    `Workers (${status.workers.length})`,
    status.workers.length === 0
      ? '  none registered'
      : formatTable(['WORKER', 'STATE', 'HEARTBEAT', 'LEASES', 'REC/S', 'BYTES/S'], workerRows),
    '',
    status.problems.length === 0 ? 'No problems found.' : `Problems (${status.problems.length})`,
    ...status.problems.map((problem) => `  - ${problem.message}`),
  ];
  return lines.join('\n');
}

export function formatLag(ms: number | null): string {
  if (ms === null) return '-';
  if (ms < 1_000) return `${ms} ms`;
  return `${(ms / 1_000).toFixed(1)} s`;
}

function formatAge(ms: number): string {
  return ms < 60_000 ? `${(ms / 1_000).toFixed(0)} s` : `${(ms / 60_000).toFixed(1)} min`;
}

function formatBytes(perSecond: number): string {
  if (perSecond < 1_024) return `${perSecond} B`;
  if (perSecond < 1_048_576) return `${(perSecond / 1_024).toFixed(1)} KiB`;
  return `${(perSecond / 1_048_576).toFixed(1)} MiB`;
}
