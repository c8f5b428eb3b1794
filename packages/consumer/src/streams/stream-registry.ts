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
  /** Listed by the last answer of the stream list. */
  tracked: boolean;
  /** When this worker noticed the stream was not listed (monotonic ms), or null while it is. */
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

/**
 * The streams of a worker. One stream: a fixed entry whose leases are keyed by shard id. Several: the
 * list (fixed, or a tracker's answer) read again on each `sync`, each stream known by its identifier
 * `account:name:creationEpoch` (described once when it first appears); a stream whose leases are in
 * the table but that is not listed is read too, under the same identifier, until its leases are
 * deleted as `formerStreams` says — or at once when the stream no longer exists in Kinesis.
 */
export class StreamRegistry {
  readonly #options: StreamRegistryOptions;
  readonly #single: StreamEntry | null;
  readonly #entries = new Map<string, MultiEntry>();
  /** Identifiers whose stream was found deleted or re-created: their leases go at the next sync. */
  readonly #gone = new Set<string>();
  /** The last description of each listed stream (by how it is listed), and when it was made. */
  readonly #described = new Map<string, { readonly description: StreamDescription; readonly at: number }>();

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

  /** The stream of a lease (a stream not listed is read by the name in its identifier). */
  forLeaseKey(leaseKey: string): StreamEntry | null {
    if (this.#single !== null) return this.#single;
    const identifier = streamIdentifierOfLeaseKey(leaseKey);
    if (identifier === undefined) return null;
    return this.#entries.get(identifier) ?? this.#former(identifier);
  }

  /** The leases of one stream among `leases`. */
  leasesOf(entry: StreamEntry, leases: readonly Lease[]): Lease[] {
    if (entry.identifier === undefined) return [...leases];
    return leases.filter((lease) => streamIdentifierOfLeaseKey(lease.leaseKey) === entry.identifier);
  }

  /**
   * Reads the stream list again (several streams): streams new to it are described and tracked,
   * streams gone from it become former streams. A list or description that fails keeps the previous
   * state for that stream; a listed stream that does not exist yet is skipped (and logged).
   */
  async sync(signal: AbortSignal): Promise<StreamListChanges> {
    const multi = this.#options.multi;
    if (multi === null) return { added: [], removed: [] };
    const { logger, clock } = this.#options;
    let configs: readonly ResolvedStreamConfig[];
    try {
      configs = await multi.settings.list();
    } catch (error) {
      // A tracker that fails may fail for a while (its own store is down): retried at the next sync,
      // and a start retries it as it retries Kinesis.
      throw new KclError(
        'STREAM_TRACKER_FAILED',
        `@kcl/consumer: the stream list could not be read (${error instanceof Error ? error.message : String(error)}); the last list stays in force`,
        { retryable: true, cause: error },
      );
    }
    const listed = new Set<string>();
    const added: StreamEntry[] = [];
    for (const config of configs) {
      const description = await this.#describe(config, signal);
      if (description === null) continue;
      const identifier = streamIdentifierOf(description);
      listed.add(identifier);
      const existing = this.#entries.get(identifier);
      if (existing !== undefined) {
        if (!existing.tracked) {
          logger.info('a former stream is listed again', { stream: identifier });
          existing.tracked = true;
          existing.formerSince = null;
          existing.providedSince = null;
          added.push(existing);
        }
        continue;
      }
      const entry = this.#entry(identifier, config, description);
      this.#entries.set(identifier, entry);
      added.push(entry);
      logger.info('reading a stream', { stream: identifier, initialPosition: config.initialPosition });
    }
    const removed: StreamEntry[] = [];
    const now = clock.monotonicNow();
    for (const entry of this.#entries.values()) {
      if (!entry.tracked || listed.has(entry.identifier)) continue;
      entry.tracked = false;
      entry.formerSince = now;
      removed.push(entry);
      logger.info('a stream is no longer listed; it is read on until its leases are deleted', {
        stream: entry.identifier,
        formerStreams: multi.settings.formerStreams.strategy,
      });
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
   * The former streams whose leases are to be deleted now: those whose stream no longer exists (a
   * description of each former stream with leases tells), and those whose wait under `formerStreams`
   * has passed. `withLeases` are the identifiers that have leases in the table.
   */
  async dueForDeletion(withLeases: ReadonlySet<string>, signal: AbortSignal): Promise<string[]> {
    const multi = this.#options.multi;
    if (multi === null) return [];
    const now = this.#options.clock.monotonicNow();
    const strategy = multi.settings.formerStreams;
    const provided = strategy.strategy === 'provided' ? new Set(await strategy.streams()) : null;
    const due: string[] = [];
    for (const identifier of withLeases) {
      const entry = this.#entries.get(identifier) ?? this.#former(identifier);
      if (entry === null || entry.tracked) continue;
      if (this.#gone.has(identifier) || (await this.#vanished(entry, signal))) {
        due.push(identifier);
        continue;
      }
      if (provided !== null) {
        const named = [
          entry.identifier,
          entry.stream.name,
          ...('streamArn' in entry.identity ? [entry.identity.streamArn] : []),
        ];
        if (named.some((name) => provided.has(name))) entry.providedSince ??= now;
        else entry.providedSince = null;
      }
      if (isDue(strategy, entry, now)) due.push(identifier);
    }
    return due;
  }

  /** Forgets a former stream whose leases were all deleted. */
  forget(identifier: string): void {
    const entry = this.#entries.get(identifier);
    if (entry !== undefined && !entry.tracked) this.#entries.delete(identifier);
    this.#gone.delete(identifier);
  }

  /**
   * A listed stream's description: made when the stream first appears, and again once it is older than
   * ten syncs (a stream deleted and re-created under its name gets a new creation time, so a new
   * identifier) — not on every sync, as DescribeStreamSummary allows 20 calls a second per account
   * for the whole fleet. Null when the stream does not exist (yet).
   */
  async #describe(config: ResolvedStreamConfig, signal: AbortSignal): Promise<StreamDescription | null> {
    const multi = this.#options.multi as NonNullable<StreamRegistryOptions['multi']>;
    const key = JSON.stringify(config.identity);
    const now = this.#options.clock.monotonicNow();
    const cached = this.#described.get(key);
    if (cached !== undefined && now - cached.at < 10 * multi.settings.syncIntervalMs) {
      return cached.description;
    }
    try {
      const description = await multi.readerFor(config.identity).describe(signal);
      this.#described.set(key, { description, at: now });
      return description;
    } catch (error) {
      if (classifyKinesisError(error) !== 'not-found') throw error;
      this.#described.delete(key);
      this.#options.logger.warn('a listed stream does not exist; it is read once it does', {
        stream: streamNameOf(config.identity),
      });
      return null;
    }
  }

  /** True when a former stream's stream is deleted or was re-created (another creation time). */
  async #vanished(entry: MultiEntry, signal: AbortSignal): Promise<boolean> {
    try {
      const description = await entry.reader.describe(signal);
      return streamIdentifierOf(description) !== entry.identifier;
    } catch (error) {
      if (classifyKinesisError(error) === 'not-found') return true;
      throw error;
    }
  }

  /** The entry of a stream known only from its leases (not listed): read by the name it carries. */
  #former(identifier: string): MultiEntry | null {
    const multi = this.#options.multi;
    const parsed = parseStreamIdentifier(identifier);
    if (multi === null || parsed === null) return null;
    const config: ResolvedStreamConfig = {
      identity: { streamName: parsed.streamName },
      initialPosition: this.#options.initialPosition,
    };
    const entry = this.#entry(identifier, config, null);
    entry.tracked = false;
    entry.formerSince = this.#options.clock.monotonicNow();
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
    // A stream is addressed by the ARN Kinesis gave when it was described (cross-account streams).
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
