import type { KclEvent, Logger } from '@kcl/core';

/** Logs what an operator follows of the worker's life: leases taken, released and created, shards ended. */
export function logConsumerEvent(logger: Logger, event: KclEvent): void {
  switch (event.type) {
    case 'lease-taken':
      logger.info('lease taken', {
        leaseKey: event.leaseKey,
        previousOwner: event.previousOwner,
        stolen: event.stolen,
      });
      break;
    case 'lease-released':
      logger.info('lease released', { leaseKey: event.leaseKey });
      break;
    case 'leases-created':
      logger.info('leases created', { leaseKeys: event.leaseKeys, cause: event.cause });
      break;
    case 'shard-ended':
      logger.info('shard ended', { leaseKey: event.leaseKey, childShardIds: event.childShardIds });
      break;
    case 'checkpoint-written':
      logger.debug('checkpoint written', {
        leaseKey: event.leaseKey,
        checkpoint: event.checkpoint.toString(),
      });
      break;
    default:
      break;
  }
}
