interface Observation {
  counter: number;
  lastChangeAt: number;
  /** The listing that last contained the key, to forget keys that disappeared. */
  seenIn: number;
}

/** How the tracker reads a key, its counter and its first-sight time from a listed item. */
export interface CounterReader<T> {
  readonly key: (item: T) => string;
  readonly counter: (item: T) => number;
  /** The last-change time to assume for a key seen for the first time. */
  readonly firstSightAt: (item: T, now: number) => number;
}

/**
 * When this observer last saw each key's counter change, on its own monotonic clock. The shared core of
 * lease expiry and worker liveness: values written by other machines are compared only with earlier
 * values of themselves, never with this machine's clock.
 */
export class CounterChangeTracker {
  readonly #observations = new Map<string, Observation>();
  #listing = 0;

  /**
   * Records one full listing made at `now`. Keys seen before keep their last-change time while the
   * counter is unchanged and move to `now` when it changed; new keys start at `firstSightAt`; keys
   * absent from the listing are forgotten.
   */
  observeAll<T>(items: Iterable<T>, reader: CounterReader<T>, now: number): void {
    const listing = ++this.#listing;
    for (const item of items) {
      const key = reader.key(item);
      const counter = reader.counter(item);
      const previous = this.#observations.get(key);
      if (previous === undefined) {
        this.#observations.set(key, {
          counter,
          lastChangeAt: reader.firstSightAt(item, now),
          seenIn: listing,
        });
      } else {
        if (previous.counter !== counter) {
          previous.counter = counter;
          previous.lastChangeAt = now;
        }
        previous.seenIn = listing;
      }
    }
    for (const [key, observation] of this.#observations) {
      if (observation.seenIn !== listing) this.#observations.delete(key);
    }
  }

  /** Records that the counter changed to `counter` at `now`, whatever was seen before. */
  recordChange(key: string, counter: number, now: number): void {
    this.#observations.set(key, { counter, lastChangeAt: now, seenIn: this.#listing });
  }

  /** The monotonic time the counter last changed; -Infinity for "never"; undefined for an unknown key. */
  lastChangeAt(key: string): number | undefined {
    return this.#observations.get(key)?.lastChangeAt;
  }

  keys(): IterableIterator<string> {
    return this.#observations.keys();
  }

  get size(): number {
    return this.#observations.size;
  }
}
