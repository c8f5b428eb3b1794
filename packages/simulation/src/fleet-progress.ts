import type { KclEvent, Lease } from '@kcl/core';
import { ExtendedSequenceNumber } from '@kcl/core';
import type { FleetStreams } from './fleet-streams.js';
import type { Ledger } from './ledger.js';
import type { SimulatedStores } from './simulated-migration.js';
import type { SimulatedStream } from './simulated-stream.js';

/**
 * What keeps the fleet from being caught up, one line per shard: an open shard without a lease, a
 * closed one short of SHARD_END, an open one short of its last record. Empty when caught up.
 */
export async function shardsBehind(
  stores: SimulatedStores,
  stream: SimulatedStream,
  ledger: Ledger,
  ownerState: (lease: Lease) => string,
): Promise<string[]> {
  const leases = new Map((await stores.leases()).map((lease) => [lease.leaseKey, lease]));
  const behind: string[] = [];
  for (const shard of stream.shards()) {
    const lease = leases.get(shard.shardId);
    const closed = shard.endingSequenceNumber !== null;
    if (lease === undefined) {
      if (!closed) behind.push(`${shard.shardId} (open) has no lease`);
      continue;
    }
    if (closed) {
      if (!lease.checkpoint.isShardEnd) {
        behind.push(`${shard.shardId} (closed) is at ${lease.checkpoint}, ${ownerState(lease)}`);
      }
      continue;
    }
    const last = ledger.lastSequenceNumberOf(shard.shardId);
    if (last !== null && !lease.checkpoint.equals(ExtendedSequenceNumber.of(last))) {
      behind.push(
        `${shard.shardId} (open) is at ${lease.checkpoint}, not at its last record ${last}, ${ownerState(lease)}`,
      );
    }
  }
  return behind;
}

/**
 * `shardsBehind` for several streams: the streams listed and the former streams whose leases are still
 * there (a former stream's open shard may have lost its lease already). An open shard must be at its
 * last record in scope (a stream read from a timestamp never reads the records before it).
 */
export async function streamsBehind(
  stores: SimulatedStores,
  streams: FleetStreams,
  ledger: Ledger,
  ownerState: (lease: Lease) => string,
): Promise<string[]> {
  const leases = new Map((await stores.leases()).map((lease) => [lease.leaseKey, lease]));
  const behind: string[] = [];
  for (const entry of streams.all) {
    if (entry.state !== 'listed' && entry.state !== 'former') continue;
    for (const shard of entry.stream.shards()) {
      const leaseKey = streams.leaseKey(entry, shard.shardId);
      const name = `${entry.stream.name}/${shard.shardId}`;
      const lease = leases.get(leaseKey);
      const closed = shard.endingSequenceNumber !== null;
      if (lease === undefined) {
        if (!closed && entry.state === 'listed') behind.push(`${name} (open) has no lease`);
        continue;
      }
      if (closed) {
        if (!lease.checkpoint.isShardEnd) {
          behind.push(`${name} (closed) is at ${lease.checkpoint}, ${ownerState(lease)}`);
        }
        continue;
      }
      const last = ledger.lastRequiredSequenceNumberOf(leaseKey);
      if (last !== null && lease.checkpoint.isBefore(ExtendedSequenceNumber.of(last))) {
        behind.push(
          `${name} (open) is at ${lease.checkpoint}, before its last record ${last}, ${ownerState(lease)}`,
        );
      }
    }
  }
  return behind;
}

/** The story line of a runtime event, or null for the events the story leaves out. */
export function storyOfEvent(event: KclEvent): string | null {
  switch (event.type) {
    case 'lease-taken':
      return `${event.workerId} takes ${event.leaseKey}${event.previousOwner === null ? '' : ` from ${event.previousOwner}`}${event.stolen ? ' (steal)' : ''}`;
    case 'lease-lost':
      return `${event.workerId} loses ${event.leaseKey} (${event.reason})`;
    case 'lease-released':
      return `${event.workerId} releases ${event.leaseKey}`;
    case 'lease-handoff':
      return `${event.workerId}: hand-off of ${event.leaseKey} from ${event.from} to ${event.to} ${event.step}`;
    case 'leases-created':
      return `${event.workerId} creates leases ${event.leaseKeys.join(', ')} (${event.cause})`;
    case 'lease-deleted':
      return `${event.workerId} deletes lease ${event.leaseKey}`;
    case 'shard-ended':
      return `${event.workerId} ends ${event.leaseKey} (children ${event.childShardIds.join(', ') || 'none'})`;
    default:
      return null;
  }
}
