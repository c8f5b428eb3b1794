import type { ExtendedSequenceNumber } from './extended-sequence-number.js';

/** Why a worker stopped holding a lease without releasing it. */
export type LeaseLossReason =
  /** Not renewed within the lease expiry: treated as lost at once, before anyone else can take it. */
  | 'expired'
  /** Another worker took it (stole it, or took it after it expired). */
  | 'taken-by-other'
  /** It was deleted from the store. */
  | 'deleted';

/** The steps of a cooperative hand-off an event reports (see the `lease-handoff` event). */
export type LeaseHandoffStep = 'requested' | 'completed' | 'received' | 'fell-back' | 'dropped';

/** Something that happened inside a worker. Every event names the worker it happened in. */
export type KclEvent =
  | { readonly type: 'worker-started'; readonly workerId: string }
  | { readonly type: 'worker-stopped'; readonly workerId: string; readonly graceful: boolean }
  | {
      readonly type: 'lease-taken';
      readonly workerId: string;
      readonly leaseKey: string;
      readonly previousOwner: string | null;
      /** True when the lease was taken from a live worker to even out the fleet. */
      readonly stolen: boolean;
    }
  | {
      readonly type: 'lease-lost';
      readonly workerId: string;
      readonly leaseKey: string;
      readonly reason: LeaseLossReason;
    }
  | { readonly type: 'lease-released'; readonly workerId: string; readonly leaseKey: string }
  | {
      /**
       * A step of a cooperative hand-off (a planned move of a lease from `from` to `to`): `requested`
       * (by `to`), `completed` (by `from`, once its processor checkpointed; the lease is now `to`'s),
       * `received` (by `to`, which now consumes it), `fell-back` (by `to`: the hand-off did not
       * complete within its timeout, so it took the lease as a steal) or `dropped` (by `to`: someone
       * else got the lease, or it is gone).
       */
      readonly type: 'lease-handoff';
      readonly workerId: string;
      readonly leaseKey: string;
      readonly from: string;
      readonly to: string;
      readonly step: LeaseHandoffStep;
    }
  | {
      readonly type: 'leases-created';
      readonly workerId: string;
      readonly leaseKeys: readonly string[];
      readonly cause: 'initial' | 'audit' | 'shard-end';
    }
  | { readonly type: 'lease-deleted'; readonly workerId: string; readonly leaseKey: string }
  | {
      readonly type: 'shard-ended';
      readonly workerId: string;
      readonly leaseKey: string;
      readonly childShardIds: readonly string[];
    }
  | {
      readonly type: 'checkpoint-written';
      readonly workerId: string;
      readonly leaseKey: string;
      readonly checkpoint: ExtendedSequenceNumber;
    }
  | {
      readonly type: 'throttled';
      readonly workerId: string;
      readonly leaseKey: string;
      readonly operation: string;
      readonly backoffMs: number;
    }
  | { readonly type: 'iterator-expired'; readonly workerId: string; readonly leaseKey: string }
  | {
      readonly type: 'processing-error';
      readonly workerId: string;
      readonly leaseKey: string;
      readonly error: unknown;
      readonly attempt: number;
      readonly action: 'retry' | 'skip';
    }
  | {
      readonly type: 'store-error';
      readonly workerId: string;
      readonly operation: string;
      readonly error: unknown;
    };

export type KclEventType = KclEvent['type'];

export type KclEventListener = (event: KclEvent) => void;

/** The event of a given type. */
export type KclEventOf<T extends KclEventType> = Extract<KclEvent, { type: T }>;
