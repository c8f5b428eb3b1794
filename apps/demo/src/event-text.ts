import { leaseLabel, shortShardId } from './demo-stream.js';
import type { EventKind } from './terminal-view.js';
import type { WorkerEvent } from './worker-protocol.js';

/** A line of the view's event list. */
export interface EventText {
  readonly kind: EventKind;
  readonly text: string;
}

/** A worker's event as a line of the view; null for the frequent ones the view leaves out. */
export function describeWorkerEvent(event: WorkerEvent): EventText | null {
  const shard = event.leaseKey === undefined ? '' : leaseLabel(event.leaseKey);
  const leases = (keys: readonly string[] | undefined): string => (keys ?? []).map(leaseLabel).join(', ');
  const shards = (ids: readonly string[] | undefined): string => (ids ?? []).map(shortShardId).join(', ');
  switch (event.type) {
    case 'worker-started':
      return { kind: 'worker', text: `${event.workerId} started` };
    case 'worker-stopped':
      return {
        kind: 'worker',
        text: `${event.workerId} stopped${event.graceful === true ? ' (graceful)' : ''}`,
      };
    case 'worker-exited':
      return { kind: 'problem', text: `${event.workerId} exited on its own (${event.reason ?? 'unknown'})` };
    case 'lease-taken':
      if (event.stolen === true)
        return {
          kind: 'lease',
          text: `${event.workerId} stole ${shard} from ${event.previousOwner ?? '?'} to even out the fleet`,
        };
      return {
        kind: 'lease',
        text:
          event.previousOwner === null || event.previousOwner === undefined
            ? `${event.workerId} took ${shard}`
            : `${event.workerId} took ${shard} (lease of ${event.previousOwner} expired or released)`,
      };
    case 'lease-lost':
      return {
        kind: 'lease',
        text: `${event.workerId} lost ${shard} (${
          event.reason === 'taken-by-other'
            ? 'taken by another worker'
            : event.reason === 'expired'
              ? 'not renewed in time'
              : (event.reason ?? 'unknown')
        })`,
      };
    case 'lease-released':
      return { kind: 'lease', text: `${event.workerId} released ${shard}` };
    case 'leases-created':
      return {
        kind: 'shard',
        text:
          event.cause === 'shard-end'
            ? `${event.workerId} created leases for the children ${leases(event.leaseKeys)}`
            : event.cause === 'initial'
              ? `${event.workerId} created the initial leases ${leases(event.leaseKeys)}`
              : `${event.workerId} created leases for uncovered shards ${leases(event.leaseKeys)}`,
      };
    case 'shard-ended':
      return {
        kind: 'shard',
        text: `${event.workerId} processed ${shard} to its end (children ${shards(event.childShardIds)})`,
      };
    case 'lease-deleted':
      return { kind: 'shard', text: `${event.workerId} deleted the finished lease of ${shard}` };
    case 'iterator-expired':
      return { kind: 'lease', text: `${event.workerId}: shard iterator of ${shard} expired; renewed` };
    case 'store-error':
      return {
        kind: 'problem',
        text: `${event.workerId}: lease store error in ${event.operation ?? '?'}: ${event.error ?? ''}`,
      };
    case 'checkpoint-failed':
      return {
        kind: 'problem',
        text: `${event.workerId}: checkpoint of ${shard} failed (tried again later): ${event.error ?? ''}`,
      };
    case 'processing-error':
      return {
        kind: 'problem',
        text: `${event.workerId}: processing error on ${shard}: ${event.error ?? ''}`,
      };
    default:
      return null;
  }
}
