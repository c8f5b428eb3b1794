import type { FormerStreamsStrategy, StreamConfig, StreamTracker } from '@kcl/consumer';
import type { Clock, Lease, RandomSource } from '@kcl/core';
import type { Ledger } from './ledger.js';
import { type SimulatedKinesis, simulatedStreamArn, simulatedStreamIdentifier } from './simulated-kinesis.js';
import { SimulatedStream } from './simulated-stream.js';

/**
 * Where a stream is in the application's life, as the simulation's tracker sees it:
 * - `dormant`: never listed (it exists in Kinesis and is written to; listed later, it is read from its
 *   initial position);
 * - `listed`: in the tracker's answer;
 * - `former`: gone from the answer, its leases still in the table (read on until they are deleted);
 * - `deleted`: gone from the answer and its leases deleted: what is written to it now is out of scope.
 */
export type FleetStreamState = 'dormant' | 'listed' | 'former' | 'deleted';

/** One stream of a multi-stream run. */
export interface FleetStream {
  readonly stream: SimulatedStream;
  readonly identifier: string;
  state: FleetStreamState;
  /** How the tracker lists it (by name or ARN, with or without an initial position). */
  config: StreamConfig;
  /** When it was last listed (added) and last removed. */
  listedAt: number;
  removedAt: number;
  /**
   * The removal the wait counts from: the first of a chain of removals whose re-listings in between were
   * too short for every worker to have seen them (a worker that did not counts from the first).
   */
  episodeStart: number;
  /** When its leases were last created after they had all been deleted (a re-creation), or null. */
  recreatedAt: number | null;
  /** Leases of it in the table now. */
  leases: number;
}

export interface FleetStreamsOptions {
  readonly count: number;
  /** The shards of the first stream (drawn by the run before it knew it had several). */
  readonly firstShards: number;
  readonly random: RandomSource;
  readonly clock: Clock;
  readonly ledger: Ledger;
  readonly tell: (line: string) => void;
  /**
   * How far before the end of its wait a former stream's records must have been written to be
   * required: more than the longest a chaotic fleet may leave a record unhandled. Records written
   * later and not handled when the leases go are out of scope.
   */
  readonly graceMs: number;
}

/** Partition keys per stream. */
export const KEYS_PER_STREAM = 8;

/**
 * The streams of a multi-stream fleet run and the application's list of them (the tracker every worker
 * asks): streams are added and removed as the schedule says, and the promises about former streams are
 * checked as their leases come and go — no lease of one deleted before `waitMs` after its removal, every
 * record written before the wait's end (less the grace) handled, out-of-scope records excused. A
 * stream's leases are keyed `identifier:shardId`; its partition keys are `name:key-N`.
 */
export class FleetStreams {
  readonly all: FleetStream[] = [];
  readonly syncIntervalMs: number;
  readonly formerStreams: Extract<FormerStreamsStrategy, { strategy: 'auto' }>;
  readonly #options: FleetStreamsOptions;
  readonly #byIdentifier = new Map<string, FleetStream>();
  #trackerFailing = false;
  stats = { added: 0, removed: 0, deleted: 0, recreated: 0 };

  constructor(options: FleetStreamsOptions) {
    this.#options = options;
    const { random, clock } = options;
    for (let index = 0; index < options.count; index++) {
      const shards = index === 0 ? options.firstShards : 1 + Math.floor(random() * 3);
      const stream = new SimulatedStream(`stream-${index + 1}`, shards, () => clock.now(), {
        sequenceSpace: index,
      });
      const entry: FleetStream = {
        stream,
        identifier: simulatedStreamIdentifier(stream),
        state: 'dormant',
        config: stream.name,
        listedAt: 0,
        removedAt: 0,
        episodeStart: -1,
        recreatedAt: null,
        leases: 0,
      };
      this.all.push(entry);
      this.#byIdentifier.set(entry.identifier, entry);
    }
    const listed = 1 + Math.floor(random() * options.count);
    for (const entry of this.all.slice(0, listed)) this.#list(entry, this.#drawConfig(entry, false));
    this.syncIntervalMs = 300 + Math.floor(random() * 2_700);
    const waitMs =
      random() < 0.35 ? 2_000 + Math.floor(random() * 4_000) : 15_000 + Math.floor(random() * 20_000);
    this.formerStreams = { strategy: 'auto', waitMs };
  }

  /** The tracker the workers ask (one answer for the whole fleet, as a shared configuration). */
  readonly tracker: StreamTracker = {
    streams: () => {
      if (this.#trackerFailing) throw new Error('simulated tracker failure');
      return this.all.filter((entry) => entry.state === 'listed').map((entry) => entry.config);
    },
  };

  serve(kinesis: SimulatedKinesis): void {
    for (const entry of this.all.slice(1)) kinesis.addStream(entry.stream);
  }

  describe(): string {
    const shards = this.all.map((entry) => `${entry.stream.name} ${entry.stream.openShards().length}`);
    return `${this.all.length} streams (${shards.join(', ')} shards; listed: ${this.listed()
      .map((entry) => entry.stream.name)
      .join(
        ', ',
      )}), stream sync every ${this.syncIntervalMs} ms, former streams' leases deleted ${this.formerStreams.waitMs} ms after their removal`;
  }

  listed(): FleetStream[] {
    return this.all.filter((entry) => entry.state === 'listed');
  }

  leaseKey(entry: FleetStream, shardId: string): string {
    return `${entry.identifier}:${shardId}`;
  }

  /** The stream of a lease key, if it is one of the run's. */
  ofLeaseKey(leaseKey: string): FleetStream | undefined {
    return this.#byIdentifier.get(leaseKey.slice(0, leaseKey.lastIndexOf(':')));
  }

  /** A story line with each stream identifier replaced by the stream's name. */
  shorten(line: string): string {
    let short = line;
    for (const entry of this.all) short = short.replaceAll(`${entry.identifier}:`, `${entry.stream.name}/`);
    return short;
  }

  /** Writes a record of key `key` (an index) to a stream; what is written to a deleted stream is out of scope. */
  put(entry: FleetStream, keyIndex: number): void {
    const { ledger } = this.#options;
    const key = `${entry.stream.name}:key-${keyIndex}`;
    const value = ledger.nextValue(key);
    const { shardId, record } = entry.stream.put(key, new TextEncoder().encode(`${key}#${value}`));
    ledger.produced(this.leaseKey(entry, shardId), record.sequenceNumber, key, value, entry.stream.name);
    if (entry.state === 'deleted') {
      ledger.excuse((produced) => produced.sequenceNumber === record.sequenceNumber);
    }
  }

  // ── the list ────────────────────────────────────────────────────────────────────────────────

  /** Lists a stream that is not listed (`atTimestamp`: it may start at the moment it is listed). */
  add(entry: FleetStream, atTimestamp: boolean): void {
    const config = this.#drawConfig(entry, atTimestamp);
    const before = entry.state;
    this.#list(entry, config);
    this.stats.added += 1;
    const position =
      typeof config === 'object' && config.initialPosition !== undefined
        ? typeof config.initialPosition === 'object'
          ? ' at the moment it is listed (AT_TIMESTAMP)'
          : ` at ${config.initialPosition}`
        : '';
    this.#options.tell(
      `the list adds ${entry.stream.name}${before === 'dormant' ? '' : ` again (it was ${before})`}${position}, as ${describeConfig(config)}`,
    );
  }

  /** Takes a listed stream off the list: it becomes a former stream. */
  remove(entry: FleetStream): void {
    if (entry.state !== 'listed') return;
    const now = this.#options.clock.monotonicNow();
    // A re-listing during the wait too short for every worker to have seen does not start a new wait.
    const seenByAll = now - entry.listedAt >= 4 * this.syncIntervalMs + 10_000;
    if (entry.episodeStart < 0 || seenByAll) entry.episodeStart = now;
    entry.state = 'former';
    entry.removedAt = now;
    this.stats.removed += 1;
    if (entry.leases === 0) {
      // No worker created its leases while it was listed: nothing reads it on, nothing is in scope.
      entry.state = 'deleted';
      const name = entry.stream.name;
      const excused = this.#options.ledger.excuse((record) => record.stream === name);
      this.#options.tell(
        `the list drops ${name}, which has no leases: its ${excused} record(s) not handled are out of scope`,
      );
      return;
    }
    this.#options.tell(
      `the list drops ${entry.stream.name}: read on until its leases are deleted (from ${entry.episodeStart + this.formerStreams.waitMs} ms)`,
    );
  }

  /** Whether a listed stream was listed long enough to be taken off again (every worker saw it listed). */
  removable(entry: FleetStream): boolean {
    return (
      entry.state === 'listed' &&
      this.#options.clock.monotonicNow() - entry.listedAt >= 2 * this.syncIntervalMs + 2_000
    );
  }

  set trackerFailing(failing: boolean) {
    this.#trackerFailing = failing;
  }

  #list(entry: FleetStream, config: StreamConfig): void {
    const { clock, ledger } = this.#options;
    const now = clock.monotonicNow();
    const fresh = entry.state !== 'former';
    entry.config = config;
    entry.state = 'listed';
    entry.listedAt = now;
    if (!fresh) return;
    // A new wait starts with the next removal (the leases are new).
    entry.episodeStart = -1;
    const name = entry.stream.name;
    if (typeof config === 'object' && typeof config.initialPosition === 'object') {
      // Read from the moment it is listed: what was written before is out of scope.
      ledger.excuse((record) => record.stream === name && record.writtenAt < now);
    } else {
      ledger.readableFromNow((record) => record.stream === name);
    }
  }

  #drawConfig(entry: FleetStream, atTimestamp: boolean): StreamConfig {
    const { random, clock } = this.#options;
    const byArn = random() < 0.3;
    const initialPosition = atTimestamp ? { timestamp: new Date(clock.now()) } : ('TRIM_HORIZON' as const);
    if (!atTimestamp && random() < 0.5) {
      return byArn ? simulatedStreamArn(entry.stream.name) : entry.stream.name;
    }
    return byArn
      ? { streamArn: simulatedStreamArn(entry.stream.name), initialPosition }
      : { streamName: entry.stream.name, initialPosition };
  }

  // ── the lease table ─────────────────────────────────────────────────────────────────────────

  /**
   * A lease of a stream changed in the table: counts its leases, checks a deletion against the wait,
   * and when a former stream's last lease goes, takes what is now out of scope out of the ledger's
   * reckoning and checks (once the owners had a lease expiry to finish their batches) that what was
   * required was handled.
   */
  leaseChanged(before: Lease | undefined, after: Lease | undefined): void {
    const lease = after ?? before;
    if (lease === undefined) return;
    const entry = this.ofLeaseKey(lease.leaseKey);
    if (entry === undefined) return;
    const { clock, ledger, tell } = this.#options;
    const now = clock.monotonicNow();
    if (before === undefined && after !== undefined) {
      entry.leases += 1;
      if (entry.leases === 1 && entry.state === 'deleted') {
        entry.recreatedAt = now;
        this.stats.recreated += 1;
        tell(`a lease of ${entry.stream.name} is created after its leases were deleted (${after.leaseKey})`);
      }
      return;
    }
    if (after !== undefined || before === undefined) return;
    entry.leases -= 1;
    // A finished lease goes with the cleanup; an unfinished one only with its stream.
    const withItsStream = !before.checkpoint.isShardEnd;
    const { waitMs } = this.formerStreams;
    if (
      withItsStream &&
      entry.state === 'listed' &&
      now - entry.listedAt >= 2 * this.syncIntervalMs + 10_000
    ) {
      ledger.violate(
        'former-stream',
        `the unfinished lease ${before.leaseKey} of ${entry.stream.name} was deleted while the stream is listed (since ${entry.listedAt} ms)`,
      );
    }
    if (withItsStream && entry.state === 'former' && now < entry.episodeStart + waitMs) {
      ledger.violate(
        'former-stream',
        `the lease ${before.leaseKey} of ${entry.stream.name} was deleted ${now - entry.episodeStart} ms after the stream was dropped from the list (waitMs ${waitMs})`,
      );
    }
    if (entry.leases > 0 || entry.state !== 'former') return;
    entry.state = 'deleted';
    this.stats.deleted += 1;
    const { graceMs } = this.#options;
    const requiredBefore = entry.episodeStart + waitMs - graceMs;
    const name = entry.stream.name;
    const excused = ledger.excuse((record) => record.stream === name && record.writtenAt >= requiredBefore);
    tell(
      `every lease of ${name} is deleted: ${excused} record(s) written from ${Math.max(0, requiredBefore)} ms on and not handled are out of scope`,
    );
    void clock.sleep(3_000).then(() => {
      const missing = ledger.unaccountedWhere(
        (record) => record.stream === name && record.writtenAt < requiredBefore,
      );
      if (missing.length === 0) return;
      const first = missing[0];
      ledger.violate(
        'lost',
        `${missing.length} record(s) of ${name} written before ${requiredBefore} ms (its removal at ${entry.episodeStart} ms + waitMs ${waitMs} − ${graceMs} ms of grace) were never handled when its leases were deleted at ${now} ms (first: ${first?.key}#${first?.value})`,
      );
      const lost = new Set(missing.map((record) => record.sequenceNumber));
      ledger.excuse((record) => lost.has(record.sequenceNumber));
    });
  }

  /**
   * Former streams whose leases should have been deleted by `now`: the wait passed, plus two stream
   * syncs and some slack, counted from the removal or from when the oldest running worker started
   * (a worker counts from when it noticed).
   */
  overdue(now: number, oldestRunningSince: number): FleetStream[] {
    const { waitMs } = this.formerStreams;
    return this.all.filter((entry) => {
      if (entry.leases === 0 || entry.state === 'listed' || entry.state === 'dormant') return false;
      const from = Math.max(entry.removedAt, entry.recreatedAt ?? 0, oldestRunningSince);
      return now > from + waitMs + 2 * this.syncIntervalMs + 5_000;
    });
  }
}

function describeConfig(config: StreamConfig): string {
  if (typeof config === 'string') return config.startsWith('arn:') ? 'its ARN' : 'its name';
  return 'streamArn' in config ? '{ streamArn, initialPosition }' : '{ streamName, initialPosition }';
}
