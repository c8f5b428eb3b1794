/** A first-in first-out queue with O(1) push and shift. */
export class Deque<T> {
  #items: T[] = [];
  #head = 0;

  get length(): number {
    return this.#items.length - this.#head;
  }

  push(item: T): void {
    this.#items.push(item);
  }

  shift(): T | undefined {
    if (this.#head >= this.#items.length) return undefined;
    const item = this.#items[this.#head] as T;
    this.#head += 1;
    if (this.#head === this.#items.length) {
      this.#items = [];
      this.#head = 0;
    } else if (this.#head > 1_024 && this.#head * 2 > this.#items.length) {
      this.#items = this.#items.slice(this.#head);
      this.#head = 0;
    }
    return item;
  }

  clear(): void {
    this.#items = [];
    this.#head = 0;
  }
}

/**
 * Messages waiting for a processor. Without partitions it is a plain FIFO. With partitions, a key
 * whose message is being handled is "busy": its next message is not handed out until the busy one
 * is released, so one key's messages are handled one at a time and in order, while ready keys take
 * turns (round robin) so one hot key does not starve the others.
 */
export class PartitionedQueue<T> {
  readonly #keyOf: ((item: T) => string) | null;
  readonly #fifo = new Deque<T>();
  readonly #byKey = new Map<string, Deque<T>>();
  readonly #readyKeys = new Deque<string>();
  readonly #busyKeys = new Set<string>();
  #length = 0;

  /** `keyOf` null: no ordering between items. */
  constructor(keyOf: ((item: T) => string) | null) {
    this.#keyOf = keyOf;
  }

  /** Items waiting (not handed out). */
  get length(): number {
    return this.#length;
  }

  push(item: T): void {
    this.#length += 1;
    if (this.#keyOf === null) {
      this.#fifo.push(item);
      return;
    }
    const key = this.#keyOf(item);
    let queue = this.#byKey.get(key);
    if (queue === undefined) {
      queue = new Deque<T>();
      this.#byKey.set(key, queue);
    }
    queue.push(item);
    if (queue.length === 1 && !this.#busyKeys.has(key)) this.#readyKeys.push(key);
  }

  /** The next item whose key is not busy; its key becomes busy until `release`. */
  take(): T | undefined {
    if (this.#keyOf === null) {
      const item = this.#fifo.shift();
      if (item !== undefined) this.#length -= 1;
      return item;
    }
    const key = this.#readyKeys.shift();
    if (key === undefined) return undefined;
    const queue = this.#byKey.get(key);
    const item = queue?.shift();
    if (queue === undefined || item === undefined) return undefined;
    if (queue.length === 0) this.#byKey.delete(key);
    this.#busyKeys.add(key);
    this.#length -= 1;
    return item;
  }

  /** The item handed out by `take` is finished: the next item of its key may go. */
  release(item: T): void {
    if (this.#keyOf === null) return;
    const key = this.#keyOf(item);
    if (!this.#busyKeys.delete(key)) return;
    if (this.#byKey.has(key)) this.#readyKeys.push(key);
  }

  clear(): void {
    this.#fifo.clear();
    this.#byKey.clear();
    this.#readyKeys.clear();
    this.#busyKeys.clear();
    this.#length = 0;
  }
}

/** A stable 32-bit FNV-1a hash, to spread partition keys over batcher lanes. */
export function hashPartition(key: string): number {
  let hash = 0x811c9dc5;
  for (let index = 0; index < key.length; index++) {
    hash ^= key.charCodeAt(index);
    hash = Math.imul(hash, 0x01000193) >>> 0;
  }
  return hash >>> 0;
}
