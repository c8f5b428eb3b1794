import type { ExtendedSequenceNumber } from '@kcl/core';

/** Something admitted in shard order that is acknowledged later, in any order. */
export interface Acknowledgeable {
  readonly position: ExtendedSequenceNumber;
  readonly done: boolean;
}

/**
 * Tracks the highest position below which everything admitted is acknowledged. Entries are added in
 * shard order (ascending sequence and sub-sequence number) and acknowledged in any order; the
 * watermark only moves over a contiguous run of acknowledged entries, so it never passes one that is
 * still pending.
 */
export class AcknowledgementWatermark<T extends Acknowledgeable> {
  #entries: T[] = [];
  #head = 0;
  #position: ExtendedSequenceNumber | null = null;
  #covered = 0;
  #last: ExtendedSequenceNumber | null = null;

  /** The position of the last entry the watermark has passed, or null before any. */
  get position(): ExtendedSequenceNumber | null {
    return this.#position;
  }

  /** How many entries the watermark has passed in total. */
  get covered(): number {
    return this.#covered;
  }

  /** Entries admitted and not yet passed by the watermark. */
  get pending(): number {
    return this.#entries.length - this.#head;
  }

  /** The position of the last entry added, or null before any. */
  get last(): ExtendedSequenceNumber | null {
    return this.#last;
  }

  /**
   * Adds an entry after every one added before. Returns false (and ignores it) when it is not past
   * the last one: a record seen twice must not be tracked twice.
   */
  add(entry: T): boolean {
    if (this.#last !== null && !entry.position.isAfter(this.#last)) return false;
    this.#entries.push(entry);
    this.#last = entry.position;
    return true;
  }

  /** Moves the watermark over the acknowledged entries at its front; returns how many it passed. */
  advance(): number {
    let passed = 0;
    while (this.#head < this.#entries.length) {
      const entry = this.#entries[this.#head] as T;
      if (!entry.done) break;
      this.#position = entry.position;
      this.#head += 1;
      passed += 1;
    }
    this.#covered += passed;
    if (this.#head > 1_024 && this.#head * 2 > this.#entries.length) {
      this.#entries = this.#entries.slice(this.#head);
      this.#head = 0;
    }
    return passed;
  }

  /**
   * Where the watermark would be if `extra` were acknowledged too (without moving it): the position of
   * the last entry of the contiguous run from the front that is acknowledged or in `extra`.
   */
  positionIfDone(extra: ReadonlySet<T>): ExtendedSequenceNumber | null {
    let position = this.#position;
    for (let index = this.#head; index < this.#entries.length; index++) {
      const entry = this.#entries[index] as T;
      if (!entry.done && !extra.has(entry)) break;
      position = entry.position;
    }
    return position;
  }

  /** Forgets every pending entry (the pipeline stopped). */
  clear(): void {
    this.#entries = [];
    this.#head = 0;
  }
}
