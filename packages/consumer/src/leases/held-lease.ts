import type { Lease, LeaseHandoff } from '@kcl/core';
import { Mutex } from '../mutex.js';

/** A lease this worker holds: one incarnation, from the take to the loss or release. */
export interface HeldLease {
  readonly leaseKey: string;
  /** Distinguishes incarnations of the same lease key: a lease taken again is a new incarnation. */
  readonly incarnation: number;
  /** Aborted as soon as the lease is no longer held (lost, expired or released). */
  readonly signal: AbortSignal;
  /** The latest copy this worker wrote or read. */
  readonly lease: Lease;
  /** Held and not locally expired. A lease found expired is declared lost on the spot. */
  isHeld(): boolean;
}

export type LeaseEntryState = 'held' | 'lost' | 'released';

/** Who judges whether an entry is still held (the lease keeper, which also declares expired ones lost). */
export interface HoldJudge {
  isHeld(held: HeldLease): boolean;
}

/** The lease keeper's record of one incarnation: its copy, its write turn and what is known of its writes. */
export class LeaseEntry implements HeldLease {
  readonly leaseKey: string;
  readonly incarnation: number;
  readonly controller = new AbortController();
  /** One write of the lease at a time, so renewals and checkpoints never race each other on the counter. */
  readonly mutex = new Mutex();
  lease: Lease;
  /** When the last successful write was sent (monotonic ms): the lease expires from then. */
  lastWriteSentAt: number;
  state: LeaseEntryState = 'held';
  /**
   * A write of this lease failed without an answer (an error, a timeout, a `failed` batch result): it
   * may have applied, so the counter this worker knows may be behind the stored one.
   */
  uncertain = false;
  /** The counter this incarnation began with: a stored copy below it belongs to an earlier one. */
  readonly firstCounter: number;
  /** A hand-off of this lease to another worker, asked for during this incarnation (null: none seen). */
  handoff: LeaseHandoff | null = null;
  readonly #judge: HoldJudge;

  constructor(judge: HoldJudge, lease: Lease, incarnation: number, writeSentAt: number) {
    this.#judge = judge;
    this.leaseKey = lease.leaseKey;
    this.lease = lease;
    this.incarnation = incarnation;
    this.lastWriteSentAt = writeSentAt;
    this.firstCounter = lease.leaseCounter;
  }

  get signal(): AbortSignal {
    return this.controller.signal;
  }

  isHeld(): boolean {
    return this.#judge.isHeld(this);
  }
}

/**
 * Takes the write turn of every entry (waiting for writes in progress) and resolves once all are held;
 * the function it resolves to hands them back. For one call that writes several leases at once.
 */
export async function holdTurns(entries: readonly LeaseEntry[]): Promise<() => void> {
  const release: Array<() => void> = [];
  const acquired = entries.map(
    (entry) =>
      new Promise<void>((turnTaken) => {
        void entry.mutex.run(
          () =>
            new Promise<void>((done) => {
              release.push(done);
              turnTaken();
            }),
        );
      }),
  );
  await Promise.all(acquired);
  return () => {
    for (const done of release) done();
  };
}
