/** A broken promise found by the simulation. */
export interface Violation {
  readonly invariant:
    | 'lost'
    | 'order'
    | 'final-state'
    | 'shard-end-early'
    | 'checkpoint-backwards'
    | 'two-consumers-in-worker'
    | 'overlap-window'
    | 'stall'
    | 'stop-timeout'
    | 'worker-failed'
    | 'wrong-stream'
    | 'delivered-after-loss'
    | 'former-stream'
    | 'taken-from-live-session'
    | 'duplicate';
  readonly at: number;
  readonly message: string;
}

interface ProducedRecord {
  readonly shardId: string;
  readonly sequenceNumber: string;
  readonly key: string;
  readonly value: number;
  /** The stream written to (several streams), or null. */
  readonly stream: string | null;
  /** When it was written (the ledger's clock). */
  readonly writtenAt: number;
  /** When it could first be read (its writing, or the moment its stream was listed). */
  readableAt: number;
  handled: number;
  skipped: boolean;
  /** Out of scope: no longer expected to be handled (a former stream's records after its leases went). */
  excused: boolean;
}

/** A produced record as `excuse` and `unaccounted` describe it. */
export interface LedgerRecord {
  readonly shardId: string;
  readonly sequenceNumber: string;
  readonly key: string;
  readonly value: number;
  readonly stream: string | null;
  readonly writtenAt: number;
}

/**
 * What was produced and what the processors did with it, kept as the simulation runs so the
 * invariants can be checked at the moment they must hold (a SHARD_END write, a first handling) as
 * well as at the end.
 */
export class Ledger {
  readonly violations: Violation[] = [];
  readonly #now: () => number;
  readonly #bySequence = new Map<string, ProducedRecord>();
  readonly #byShard = new Map<string, ProducedRecord[]>();
  readonly #values = new Map<string, number>();
  /** Per key, its records by value (index value − 1). */
  readonly #byKey = new Map<string, ProducedRecord[]>();
  /** Per key: every value up to this one was handled (or skipped) at least once. */
  readonly #handledPrefix = new Map<string, number>();
  /** Per key: the value a last-write-wins table holds after the handlers' writes. */
  readonly #table = new Map<string, number>();
  #unhandled = 0;
  #orderChecked = true;
  #longestWaitMs = 0;

  readonly #trace: ((line: string) => void) | null;

  /** `trace` receives a line for every handling of a record of `tracedKey` (for a story). */
  constructor(
    now: () => number,
    trace: { readonly key: string; readonly tell: (line: string) => void } | null = null,
  ) {
    this.#now = now;
    this.#tracedKey = trace?.key ?? null;
    this.#trace = trace?.tell ?? null;
  }

  readonly #tracedKey: string | null;

  /** Whether first handlings must follow key order (false for handlers that may fail one record and write the next). */
  set orderChecked(checked: boolean) {
    this.#orderChecked = checked;
  }

  /** The next value of a key (1, 2, …): its records carry increasing values. */
  nextValue(key: string): number {
    const value = (this.#values.get(key) ?? 0) + 1;
    this.#values.set(key, value);
    return value;
  }

  /** A record was written; `shardId` is the key its shard's lease has, `stream` names its stream (several). */
  produced(shardId: string, sequenceNumber: string, key: string, value: number, stream?: string): void {
    const record: ProducedRecord = {
      shardId,
      sequenceNumber,
      key,
      value,
      stream: stream ?? null,
      writtenAt: this.#now(),
      readableAt: this.#now(),
      handled: 0,
      skipped: false,
      excused: false,
    };
    this.#bySequence.set(sequenceNumber, record);
    const list = this.#byShard.get(shardId) ?? [];
    list.push(record);
    this.#byShard.set(shardId, list);
    const ofKey = this.#byKey.get(key) ?? [];
    ofKey[value - 1] = record;
    this.#byKey.set(key, ofKey);
    this.#unhandled += 1;
  }

  get producedCount(): number {
    return this.#bySequence.size;
  }

  get unhandled(): number {
    return this.#unhandled;
  }

  /** The longest a record waited from when it could be read to its first handling (or skip). */
  get longestWaitMs(): number {
    return this.#longestWaitMs;
  }

  /**
   * A handler applied a record (`write`: it also wrote it to the last-write-wins table); `stream` is the
   * stream its processor was told it reads (several streams).
   */
  handled(sequenceNumber: string, who: string, write = true, stream?: string): void {
    const record = this.#bySequence.get(sequenceNumber);
    if (record === undefined) {
      this.#violate('lost', `${who} handled ${sequenceNumber}, which was never produced`);
      return;
    }
    if (stream !== undefined && record.stream !== null && stream !== record.stream) {
      this.#violate(
        'wrong-stream',
        `${who} was told it reads ${stream} and handled ${record.key}#${record.value}, a record of ${record.stream}`,
      );
    }
    if (write) this.#table.set(record.key, record.value);
    if (record.key === this.#tracedKey)
      this.#trace?.(`${who} handles ${record.key}#${record.value} (${record.shardId})`);
    this.#account(record, who);
    record.handled += 1;
  }

  /** A handler gave up on a record on purpose (a `skip`): it counts as accounted for, not as lost. */
  skipped(sequenceNumber: string, who: string): void {
    const record = this.#bySequence.get(sequenceNumber);
    if (record === undefined) return;
    if (record.key === this.#tracedKey)
      this.#trace?.(`${who} skips ${record.key}#${record.value} (${record.shardId})`);
    this.#account(record, who);
    record.skipped = true;
  }

  #account(record: ProducedRecord, who: string): void {
    if (record.handled > 0 || record.skipped || record.excused) return;
    this.#unhandled -= 1;
    this.#longestWaitMs = Math.max(this.#longestWaitMs, this.#now() - record.readableAt);
    this.#advance(record, who, true);
  }

  /** Moves the key's accounted prefix past `record`, or reports it out of order (`checkOrder`). */
  #advance(record: ProducedRecord, who: string, checkOrder: boolean): void {
    const prefix = this.#handledPrefix.get(record.key) ?? 0;
    if (record.value === prefix + 1) {
      // Later values may have been accounted for already (without order checking): catch up.
      let next = record.value;
      while (this.#isAccounted(record.key, next + 1)) next += 1;
      this.#handledPrefix.set(record.key, next);
    } else if (checkOrder && this.#orderChecked) {
      this.#violate(
        'order',
        `${who} handled ${record.key}#${record.value} (${record.shardId} ${record.sequenceNumber}) first, before ${record.key}#${prefix + 1}`,
      );
    }
  }

  #isAccounted(key: string, value: number): boolean {
    const record = this.#byKey.get(key)?.[value - 1];
    return record !== undefined && (record.handled > 0 || record.skipped || record.excused);
  }

  /**
   * Takes the records matching `filter` that are not accounted for out of scope: they need not be
   * handled (nor does a later record of their key wait for them). Returns how many.
   */
  excuse(filter: (record: LedgerRecord) => boolean): number {
    let excused = 0;
    for (const record of this.#bySequence.values()) {
      if (record.handled > 0 || record.skipped || record.excused || !filter(record)) continue;
      record.excused = true;
      this.#unhandled -= 1;
      this.#advance(record, 'excused', false);
      excused += 1;
    }
    return excused;
  }

  /** The records matching `filter` not accounted for yet could not be read before now (their stream was not listed). */
  readableFromNow(filter: (record: LedgerRecord) => boolean): void {
    for (const record of this.#bySequence.values()) {
      if (record.handled > 0 || record.skipped || record.excused || !filter(record)) continue;
      record.readableAt = this.#now();
    }
  }

  /** Records not accounted for (neither handled, skipped nor excused) that match `filter`, oldest first. */
  unaccountedWhere(filter: (record: LedgerRecord) => boolean): LedgerRecord[] {
    return [...this.#bySequence.values()].filter(
      (record) => record.handled === 0 && !record.skipped && !record.excused && filter(record),
    );
  }

  /** Called when SHARD_END is written for a shard: every record of it must have been accounted for. */
  shardEndWritten(shardId: string, who: string): void {
    const missing = (this.#byShard.get(shardId) ?? []).filter(
      (record) => record.handled === 0 && !record.skipped && !record.excused,
    );
    if (missing.length > 0) {
      this.#violate(
        'shard-end-early',
        `${who} wrote SHARD_END for ${shardId} with ${missing.length} of its records never handled (first: ${missing[0]?.key}#${missing[0]?.value} ${missing[0]?.sequenceNumber})`,
      );
    }
  }

  /** Records never handled nor skipped, oldest first. */
  unaccounted(): Array<{ shardId: string; key: string; value: number; sequenceNumber: string }> {
    return [...this.#bySequence.values()]
      .filter((record) => record.handled === 0 && !record.skipped && !record.excused)
      .map(({ shardId, key, value, sequenceNumber }) => ({ shardId, key, value, sequenceNumber }));
  }

  /**
   * Keys whose last-write-wins value is not the last value produced (skipped or excused records
   * excepted), among the keys `include` accepts.
   */
  staleKeys(
    include: (key: string) => boolean = () => true,
  ): Array<{ key: string; expected: number; actual: number | undefined }> {
    const stale: Array<{ key: string; expected: number; actual: number | undefined }> = [];
    for (const [key, last] of this.#values) {
      const lastRecord = this.#byKey.get(key)?.[last - 1];
      if (lastRecord?.skipped === true || lastRecord?.excused === true || !include(key)) continue;
      const actual = this.#table.get(key);
      if (actual !== last) stale.push({ key, expected: last, actual });
    }
    return stale;
  }

  /** The last sequence number produced on a shard, or null. */
  lastSequenceNumberOf(shardId: string): string | null {
    return this.#byShard.get(shardId)?.at(-1)?.sequenceNumber ?? null;
  }

  /** The last sequence number produced on a shard that is not out of scope, or null. */
  lastRequiredSequenceNumberOf(shardId: string): string | null {
    const records = this.#byShard.get(shardId) ?? [];
    for (let index = records.length - 1; index >= 0; index--) {
      const record = records[index] as ProducedRecord;
      if (!record.excused) return record.sequenceNumber;
    }
    return null;
  }

  /** Records handled more than once, oldest first (at most `limit`). */
  handledTwice(limit: number): string[] {
    const found: string[] = [];
    for (const record of this.#bySequence.values()) {
      if (record.handled < 2) continue;
      found.push(
        `${record.key}#${record.value} (${record.shardId} ${record.sequenceNumber}) ${record.handled} times`,
      );
      if (found.length >= limit) break;
    }
    return found;
  }

  duplicates(): number {
    let duplicates = 0;
    for (const record of this.#bySequence.values()) duplicates += Math.max(0, record.handled - 1);
    return duplicates;
  }

  violate(invariant: Violation['invariant'], message: string): void {
    this.#violate(invariant, message);
  }

  #violate(invariant: Violation['invariant'], message: string): void {
    this.violations.push({ invariant, at: this.#now(), message });
  }
}
