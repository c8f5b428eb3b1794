import type { Clock, KclEvent, Lease, LeaseStore, Logger } from '@kcl/core';
import { KclError } from '@kcl/core';
import { streamIdentifierOfLeaseKey } from '@kcl/shard-graph';
import { classifyKinesisError } from '../kinesis/kinesis-errors.js';
import type { StreamDescription, StreamIdentity, StreamReader } from '../kinesis/kinesis-stream.js';
import { ShardSync } from '../leases/shard-sync.js';
import {
  type ConsumedStream,
  type FormerStreamsStrategy,
  type InitialPosition,
  parseStreamIdentifier,
  type ResolvedMultiStream,
  type ResolvedStreamConfig,
  streamIdentifierOf,
  streamNameOf,
} from './stream-options.js';

/** A stream reader that can also describe its stream (multi-stream applications need its creation time). */
export interface DescribableStreamReader extends StreamReader {
  describe(signal?: AbortSignal): Promise<StreamDescription>;
}

/** One stream the worker reads: its reader, where its new shards start, its lease key prefix. */
export interface StreamEntry {
  /** The prefix of its lease keys; undefined when the application reads one stream. */
  readonly identifier: string | undefined;
  readonly stream: ConsumedStream;
  readonly identity: StreamIdentity;
  readonly reader: StreamReader;
  readonly initialPosition: InitialPosition;
  readonly sync: ShardSync;
}

interface MultiEntry extends StreamEntry {
  readonly identifier: string;
  readonly reader: DescribableStreamReader;
  /** Listed by the last complete answer of the stream list. */
  tracked: boolean;
  /** When this worker noticed the stream was not listed (monotonic ms); null while listed or not known yet. */
  formerSince: number | null;
  /** When `formerStreams.streams()` first named it (monotonic ms), or null. */
  providedSince: number | null;
}

export interface StreamRegistryOptions {
  /** The one stream read, or null for a multi-stream application. */
  readonly single: { readonly identity: StreamIdentity; readonly reader: StreamReader } | null;
  readonly multi: {
    readonly settings: ResolvedMultiStream;
    readonly readerFor: (identity: StreamIdentity) => DescribableStreamReader;
    /** The Kinesis client's region: a stream known only from its leases is addressed by ARN in it. */
    readonly region: () => Promise<string>;
  } | null;
  readonly initialPosition: InitialPosition;
  readonly store: LeaseStore;
  readonly workerId: string;
  readonly clock: Clock;
  readonly logger: Logger;
  readonly emit: (event: KclEvent) => void;
}

/** What one sync of the stream list found. */
export interface StreamListChanges {
  /** Streams listed now that were not before (their leases may have to be created). */
  readonly added: readonly StreamEntry[];
  /** Streams no longer listed. */
  readonly removed: readonly StreamEntry[];
}

/** How many stream syncs a description is trusted for before the stream is described again. */
const DESCRIPTION_SYNCS = 5;

/**
 * The streams of a worker. One stream: a fixed entry whose leases are keyed by shard id. Several: the
 * list (fixed, or a tracker's answer) read again on each `sync`, each stream known by its identifier
 * `account:name:creationEpoch` (described when it first appears, and again every few syncs); a stream
 * whose leases are in the table but that is not listed is read too, by the ARN its identifier names,
 * until its leases are deleted as `formerStreams` says — or at once when the stream no longer exists.
 */
export class StreamRegistry {
  readonly #options: StreamRegistryOptions;
  readonly #single: StreamEntry | null;
  readonly #entries = new Map<string, MultiEntry>();
  /** Identifiers whose stream was found deleted or re-created: their leases go at the next sync. */
  readonly #gone = new Set<string>();
  /** Former streams whose leases this worker deleted: not read again, leases that reappear go too. */
  readonly #deleted = new Set<string>();
  /** Streams this worker saw leases of: their leases are not created again by it (see `mayCreateLeases`). */
  readonly #hadLeases = new Set<string>();
  /** The last description of each listed stream (by how it is listed), and when it was made. */
  readonly #described = new Map<string, { readonly description: StreamDescription; readonly at: number }>();
  /** When each former stream was last found still there (monotonic ms). */
  readonly #checkedThere = new Map<string, number>();
  /** True once a complete answer of the stream list was read: only then are streams former. */
  #listKnown = false;
  #region: string | null = null;

  constructor(options: StreamRegistryOptions) {
    this.#options = options;
    const single = options.single;
    this.#single =
      single === null
        ? null
        : {
            identifier: undefined,
            stream: { name: streamNameOf(single.identity), identifier: null },
            identity: single.identity,
            reader: single.reader,
            initialPosition: options.initialPosition,
            sync: this.#shardSync(single.reader, undefined, options.initialPosition),
          };
  }

  get multiStream(): boolean {
    return this.#single === null;
  }

  /** The single stream's entry (one-stream applications only). */
  get single(): StreamEntry | null {
    return this.#single;
  }

  /** The streams listed now (the one stream, or every stream of the last list answer). */
  tracked(): StreamEntry[] {
    if (this.#single !== null) return [this.#single];
    return [...this.#entries.values()].filter((entry) => entry.tracked);
  }

  /**
   * Whether a lease belongs to this application's streams: any lease with one stream; a lease whose
   * key carries a stream identifier with several (a single-stream key cannot be read then).
   */
  accepts(leaseKey: string): boolean {
    if (this.#single !== null) return true;
    const identifier = streamIdentifierOfLeaseKey(leaseKey);
    return identifier !== undefined && parseStreamIdentifier(identifier) !== null;
  }

  /**
   * The stream of a lease (a stream not listed is read by the ARN its identifier names); null for a
   * lease of no stream, or of a former stream whose leases this worker deleted.
   */
  forLeaseKey(leaseKey: string): StreamEntry | null {
    if (this.#single !== null) return this.#single;
    const identifier = streamIdentifierOfLeaseKey(leaseKey);
    if (identifier === undefined || this.#deleted.has(identifier)) return null;
    return this.#entries.get(identifier) ?? this.#former(identifier);
  }

  /** The leases of one stream among `leases`. */
  leasesOf(entry: StreamEntry, leases: readonly Lease[]): Lease[] {
    if (entry.identifier === undefined) return [...leases];
    return leases.filter((lease) => streamIdentifierOfLeaseKey(lease.leaseKey) === entry.identifier);
  }

  /** Records which streams a listing of the lease table shows leases of. */
  noteLeases(leases: readonly Lease[]): void {
    if (this.#single !== null) return;
    for (const lease of leases) {
      const identifier = streamIdentifierOfLeaseKey(lease.leaseKey);
      if (identifier !== undefined) this.#hadLeases.add(identifier);
    }
  }

  /**
   * Whether this worker may create the first leases of a listed stream that has none: not when it saw
   * leases of it before. They were deleted as a former stream by a worker whose list no longer names
   * it; creating them again would start the stream over at its initial position.
   */
  mayCreateLeases(entry: StreamEntry): boolean {
    return entry.identifier === undefined || !this.#hadLeases.has(entry.identifier);
  }

  /**
   * Reads the stream list again (several streams): streams new to it are described and tracked,
   * streams gone from it become former streams. A stream whose description fails keeps its previous
   * state, and no stream becomes former from an answer that could not be resolved whole; a listed
   * stream that does not exist yet is skipped (and logged). A list that cannot be read throws.
   */
  async sync(signal: AbortSignal): Promise<StreamListChanges> {
    const multi = this.#options.multi;
    if (multi === null) return { added: [], removed: [] };
    const { logger, clock } = this.#options;
    await this.#resolveRegion();
    let configs: readonly ResolvedStreamConfig[];
    try {
      configs = await multi.settings.list();
    } catch (error) {
      // A tracker that fails may fail for a while (its own store is down): retried at the next sync.
      throw new KclError(
        'STREAM_TRACKER_FAILED',
        `@kcl/consumer: the stream list could not be read (${error instanceof Error ? error.message : String(error)}); the last list stays in force`,
        { retryable: true, cause: error },
      );
    }
    const listed = new Set<string>();
    const added: StreamEntry[] = [];
    let complete = true;
    for (const config of configs) {
      const description = await this.#describe(config, signal);
      if (description === 'failed') {
        complete = false;
        continue;
      }
      if (description === null) continue;
      const identifier = streamIdentifierOf(description);
      listed.add(identifier);
      const existing = this.#entries.get(identifier);
      if (existing?.tracked === true) continue;
      // New, or a former stream listed again: addressed and started as listed now.
      const entry = this.#entry(identifier, config, description);
      this.#entries.set(identifier, entry);
      this.#deleted.delete(identifier);
      this.#checkedThere.delete(identifier);
      if (existing === undefined) this.#hadLeases.delete(identifier);
      added.push(entry);
      logger.info(existing === undefined ? 'reading a stream' : 'a former stream is listed again', {
        stream: identifier,
        initialPosition: config.initialPosition,
      });
    }
    const removed: StreamEntry[] = [];
    if (!complete) return { added, removed };
    this.#listKnown = true;
    const now = clock.monotonicNow();
    for (const entry of this.#entries.values()) {
      if (listed.has(entry.identifier)) continue;
      if (entry.tracked) {
        entry.tracked = false;
        removed.push(entry);
        logger.info('a stream is no longer listed; it is read on until its leases are deleted', {
          stream: entry.identifier,
          formerStreams: multi.settings.formerStreams.strategy,
        });
      }
      entry.formerSince ??= now;
    }
    // A listed name whose stream was re-created has a new identifier: the old one has nothing left.
    const listedNames = new Map<string, string>();
    for (const identifier of listed) {
      const parsed = parseStreamIdentifier(identifier);
      if (parsed !== null) listedNames.set(`${parsed.account}:${parsed.streamName}`, identifier);
    }
    for (const entry of this.#entries.values()) {
      if (entry.tracked) continue;
      const parsed = parseStreamIdentifier(entry.identifier);
      if (parsed === null) continue;
      const current = listedNames.get(`${parsed.account}:${parsed.streamName}`);
      if (current !== undefined && current !== entry.identifier) this.#gone.add(entry.identifier);
    }
    return { added, removed };
  }

  /**
   * The former streams whose leases are to be deleted now: those whose stream no longer exists (each
   * former stream with leases is described every few syncs), those whose wait under `formerStreams`
   * has passed, and those this worker deleted before whose leases reappeared. Nothing is due before a
   * complete stream list was read. `withLeases` are the identifiers that have leases in the table.
   */
  async dueForDeletion(withLeases: ReadonlySet<string>, signal: AbortSignal): Promise<string[]> {
    const multi = this.#options.multi;
    if (multi === null || !this.#listKnown) return [];
    const { clock, logger } = this.#options;
    const now = clock.monotonicNow();
    const strategy = multi.settings.formerStreams;
    let provided: Set<string> | null = null;
    if (strategy.strategy === 'provided') {
      try {
        provided = new Set(await strategy.streams());
      } catch (error) {
        logger.warn('formerStreams.streams() failed; no provided stream is deleted this time', { error });
        provided = new Set();
      }
    }
    const due: string[] = [];
    for (const identifier of withLeases) {
      if (this.#deleted.has(identifier) || this.#gone.has(identifier)) {
        due.push(identifier);
        continue;
      }
      const entry = this.#entries.get(identifier) ?? this.#former(identifier);
      if (entry === null || entry.tracked) continue;
      try {
        if (await this.#vanished(entry, signal)) {
          due.push(identifier);
          continue;
        }
      } catch (error) {
        logger.warn('could not check whether a former stream still exists', { stream: identifier, error });
      }
      if (provided !== null) {
        const names = [
          entry.identifier,
          entry.stream.name,
          ...('streamArn' in entry.identity ? [entry.identity.streamArn] : []),
        ];
        if (names.some((name) => provided.has(name))) entry.providedSince ??= now;
        else entry.providedSince = null;
      }
      if (isDue(strategy, entry, now)) due.push(identifier);
    }
    return due;
  }

  /** A former stream whose leases were all deleted: not read again by this worker unless listed again. */
  forget(identifier: string): void {
    const entry = this.#entries.get(identifier);
    if (entry !== undefined && !entry.tracked) this.#entries.delete(identifier);
    this.#gone.delete(identifier);
    this.#checkedThere.delete(identifier);
    this.#deleted.add(identifier);
  }

  /**
   * A listed stream's description: made when the stream first appears, and again once it is a few
   * syncs old (a stream deleted and re-created under its name gets a new creation time, so a new
   * identifier) — not on every sync, as DescribeStreamSummary allows 20 calls a second per account
   * for the whole fleet. Null when the stream does not exist (yet); 'failed' when it could not be
   * described (the last description, if any, stands in).
   */
  async #describe(
    config: ResolvedStreamConfig,
    signal: AbortSignal,
  ): Promise<StreamDescription | null | 'failed'> {
    const multi = this.#options.multi as NonNullable<StreamRegistryOptions['multi']>;
    const key = JSON.stringify(config.identity);
    const now = this.#options.clock.monotonicNow();
    const cached = this.#described.get(key);
    if (cached !== undefined && now - cached.at < DESCRIPTION_SYNCS * multi.settings.syncIntervalMs) {
      return cached.description;
    }
    try {
      const description = await multi.readerFor(config.identity).describe(signal);
      this.#described.set(key, { description, at: now });
      return description;
    } catch (error) {
      if (classifyKinesisError(error) === 'not-found') {
        this.#described.delete(key);
        this.#options.logger.warn('a listed stream does not exist; it is read once it does', {
          stream: streamNameOf(config.identity),
        });
        return null;
      }
      this.#options.logger.warn('could not describe a listed stream; its last state stands', {
        stream: streamNameOf(config.identity),
        error,
      });
      return cached?.description ?? 'failed';
    }
  }

  /**
   * True when a former stream's stream is deleted or was re-created (another creation time). A stream
   * found still there is not described again for a few syncs.
   */
  async #vanished(entry: MultiEntry, signal: AbortSignal): Promise<boolean> {
    const multi = this.#options.multi as NonNullable<StreamRegistryOptions['multi']>;
    const now = this.#options.clock.monotonicNow();
    const checked = this.#checkedThere.get(entry.identifier);
    if (checked !== undefined && now - checked < DESCRIPTION_SYNCS * multi.settings.syncIntervalMs)
      return false;
    try {
      const description = await entry.reader.describe(signal);
      if (streamIdentifierOf(description) !== entry.identifier) return true;
      this.#checkedThere.set(entry.identifier, now);
      return false;
    } catch (error) {
      if (classifyKinesisError(error) === 'not-found') return true;
      throw error;
    }
  }

  async #resolveRegion(): Promise<void> {
    if (this.#region !== null) return;
    const multi = this.#options.multi as NonNullable<StreamRegistryOptions['multi']>;
    try {
      this.#region = await multi.region();
    } catch (error) {
      this.#options.logger.warn('the Kinesis client has no region; former streams are read by name', {
        error,
      });
    }
  }

  /**
   * The entry of a stream known only from its leases (not listed): addressed by the ARN its identifier
   * names in the client's region (by name when the region is unknown).
   */
  #former(identifier: string): MultiEntry | null {
    const multi = this.#options.multi;
    const parsed = parseStreamIdentifier(identifier);
    if (multi === null || parsed === null) return null;
    const region = this.#region;
    const identity: StreamIdentity =
      region === null
        ? { streamName: parsed.streamName }
        : {
            streamArn: `arn:${partitionOf(region)}:kinesis:${region}:${parsed.account}:stream/${parsed.streamName}`,
          };
    const entry = this.#entry(identifier, { identity, initialPosition: this.#options.initialPosition }, null);
    entry.tracked = false;
    entry.formerSince = this.#listKnown ? this.#options.clock.monotonicNow() : null;
    this.#entries.set(identifier, entry);
    this.#options.logger.info(
      'found leases of a stream that is not listed; reading it until they are deleted',
      {
        stream: identifier,
        formerStreams: multi.settings.formerStreams.strategy,
      },
    );
    return entry;
  }

  #entry(
    identifier: string,
    config: ResolvedStreamConfig,
    description: StreamDescription | null,
  ): MultiEntry {
    const multi = this.#options.multi as NonNullable<StreamRegistryOptions['multi']>;
    // A described stream is addressed by the ARN Kinesis gave (cross-account streams).
    const identity: StreamIdentity =
      description === null ? config.identity : { streamArn: description.streamArn };
    const reader = multi.readerFor(identity);
    return {
      identifier,
      stream: { name: description?.streamName ?? streamNameOf(config.identity), identifier },
      identity,
      reader,
      initialPosition: config.initialPosition,
      sync: this.#shardSync(reader, identifier, config.initialPosition),
      tracked: true,
      formerSince: null,
      providedSince: null,
    };
  }

  #shardSync(
    reader: StreamReader,
    identifier: string | undefined,
    initialPosition: InitialPosition,
  ): ShardSync {
    const { store, workerId, clock, logger, emit } = this.#options;
    return new ShardSync({
      store,
      stream: reader,
      initialPosition,
      workerId,
      clock,
      logger,
      emit,
      ...(identifier === undefined ? {} : { streamIdentifier: identifier }),
    });
  }
}

/** The ARN partition of a region. */
function partitionOf(region: string): string {
  if (region.startsWith('cn-')) return 'aws-cn';
  if (region.startsWith('us-gov-')) return 'aws-us-gov';
  return 'aws';
}

function isDue(strategy: FormerStreamsStrategy, entry: MultiEntry, now: number): boolean {
  switch (strategy.strategy) {
    case 'none':
      return false;
    case 'auto':
      return entry.formerSince !== null && now - entry.formerSince >= strategy.waitMs;
    case 'provided':
      return entry.providedSince !== null && now - entry.providedSince >= strategy.waitMs;
  }
}
