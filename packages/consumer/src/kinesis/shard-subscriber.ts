import type { _Record as KinesisSdkRecord } from '@aws-sdk/client-kinesis';
import type { Clock, RandomSource } from '@kcl/core';
import { KclError } from '@kcl/core';
import { Backoff } from '../backoff.js';
import { classifyKinesisError, type KinesisErrorKind } from './kinesis-errors.js';
import type { IteratorPosition, ShardEvent, StreamReader } from './kinesis-stream.js';
import type { BatchSource, FetchedBatch, FetchIssue } from './record-fetcher.js';
import { RecordFetcher } from './record-fetcher.js';

export interface ShardSubscriberOptions {
  readonly stream: StreamReader;
  readonly consumerArn: string;
  readonly shardId: string;
  readonly start: IteratorPosition;
  readonly clock: Clock;
  readonly random: RandomSource;
  readonly backoff: { readonly initialMs: number; readonly maxMs: number };
  /** A subscription is renewed (from its last continuation) after this long; Kinesis ends it at 5 min. */
  readonly subscriptionLifetimeMs: number;
  /** A subscription that delivers no event for this long is started again. */
  readonly idleTimeoutMs: number;
  /**
   * While events come empty, how often to look whether the shard was closed (ListShards): a Kinesis
   * that sends no ChildShards at a closed shard's end (some emulators) is then read to its end by
   * GetRecords.
   */
  readonly closedShardCheckIntervalMs: number;
  /** For the GetRecords read of a closed shard's rest. */
  readonly polling: { readonly maxRecords: number; readonly pollIntervalMs: number };
  readonly onIssue?: (issue: SubscriptionIssue) => void;
  /** The stream consumer was found gone (deregistered) while the shard is still there. */
  readonly onConsumerGone?: () => void;
  /** Called when a SubscribeToShard call was answered (a subscription started), with how long it took. */
  readonly onSubscribed?: (durationMs: number) => void;
  /** Called with the records of each event (and how long it waited for it). */
  readonly onEvent?: (waitedMs: number, recordCount: number) => void;
  /** Called with the latency of each successful GetRecords call that reads a closed shard's rest. */
  readonly onGetRecords?: (durationMs: number, recordCount: number) => void;
}

export type SubscriptionIssueKind =
  | KinesisErrorKind
  | 'resource-in-use'
  | 'idle'
  | 'renewed'
  | 'closed-without-children';

export interface SubscriptionIssue {
  readonly kind: SubscriptionIssueKind;
  /** The call it came from: a subscription, or GetRecords reading a closed shard's rest. */
  readonly operation: 'SubscribeToShard' | 'GetRecords';
  readonly error: unknown;
  readonly backoffMs: number;
}

/** A subscription that another one of the same consumer still holds waits at least this long. */
const RESOURCE_IN_USE_WAIT_MS = 1_000;

/**
 * Reads one shard with SubscribeToShard (enhanced fan-out), one event at a time: the next event is
 * read only once the consumer has taken the previous one, so a slow processor slows the subscription
 * down instead of filling memory. The subscription is renewed from its last continuation before
 * Kinesis ends it, and started again when it delivers nothing for `idleTimeoutMs`; another active
 * subscription of the consumer (ResourceInUse, for about 5 s after the previous one ended) is waited
 * out; throttling and network failures back off with jitter. Records the shard already delivered are
 * never delivered again across subscriptions. The shard's end comes from the final event (ChildShards,
 * no continuation); where Kinesis closes a shard without saying so, the rest is read with GetRecords.
 */
export class ShardSubscriber implements BatchSource {
  readonly #options: ShardSubscriberOptions;
  readonly #controller = new AbortController();
  readonly #buffered: FetchedBatch[] = [];
  #failure: unknown = null;
  #ended = false;
  #wakeConsumer: (() => void) | null = null;
  #wakeProducer: (() => void) | null = null;
  /** The last record delivered: a subscription never delivers it or any before it again. */
  #lastSequenceNumber: bigint | null = null;
  #lastSequenceText: string | null = null;
  #continuation: string | null = null;
  /** Reads a closed shard's rest once the subscription turned out not to end it. */
  #tail: RecordFetcher | null = null;
  #loop: Promise<void> | null = null;
  /** When ListShards was last asked whether the shard is closed (across subscriptions). */
  #lastClosedCheck: number;

  constructor(options: ShardSubscriberOptions) {
    if (options.stream.subscribeToShard === undefined) {
      throw new KclError(
        'FANOUT_UNSUPPORTED',
        '@kcl/consumer: this stream reader cannot subscribe to shards',
      );
    }
    this.#options = options;
    this.#lastClosedCheck = options.clock.monotonicNow();
  }

  start(): void {
    this.#loop ??= this.#run().catch((error: unknown) => {
      this.#failure = error;
      this.#wakeConsumer?.();
    });
  }

  async next(signal?: AbortSignal): Promise<FetchedBatch | null> {
    for (;;) {
      const batch = this.#buffered.shift();
      if (batch !== undefined) {
        this.#wakeProducer?.();
        return batch;
      }
      if (this.#failure !== null) throw this.#failure;
      if (this.#tail !== null) return this.#tail.next(signal);
      if (this.#controller.signal.aborted || signal?.aborted || this.#ended) return null;
      await new Promise<void>((resolve) => {
        const onAbort = (): void => resolve();
        signal?.addEventListener('abort', onAbort, { once: true });
        this.#wakeConsumer = () => {
          signal?.removeEventListener('abort', onAbort);
          resolve();
        };
      });
      this.#wakeConsumer = null;
    }
  }

  async stop(): Promise<void> {
    this.#controller.abort();
    this.#wakeProducer?.();
    this.#wakeConsumer?.();
    await this.#loop;
    await this.#tail?.stop();
  }

  async #run(): Promise<void> {
    const options = this.#options;
    const signal = this.#controller.signal;
    const backoff = new Backoff({ ...options.backoff, random: options.random });
    while (!signal.aborted) {
      const subscription = new AbortController();
      const stopSubscription = (): void => subscription.abort();
      signal.addEventListener('abort', stopSubscription, { once: true });
      try {
        const requestedAt = options.clock.monotonicNow();
        const events = await (
          options.stream.subscribeToShard as NonNullable<StreamReader['subscribeToShard']>
        )(options.consumerArn, options.shardId, this.#position(), subscription.signal);
        options.onSubscribed?.(options.clock.monotonicNow() - requestedAt);
        const outcome = await this.#read(events, subscription, backoff);
        if (outcome === 'ended' || outcome === 'closed') return;
        if (outcome === 'empty' || outcome === 'doubted') {
          // Ended before its first event, or with an end that was not one: not again at once (an
          // endpoint that does this to every subscription would make it a tight loop).
          const delay = backoff.next();
          options.onIssue?.({
            kind: 'transient',
            operation: 'SubscribeToShard',
            error: null,
            backoffMs: delay,
          });
          await options.clock.sleep(delay, signal);
        }
      } catch (error) {
        if (signal.aborted) break;
        await this.#onFailure(error, backoff);
      } finally {
        subscription.abort();
        signal.removeEventListener('abort', stopSubscription);
      }
    }
  }

  /**
   * Reads one subscription's events until it ends, is renewed or goes idle ('again'; 'empty' when it
   * ended before its first event, 'doubted' after an end without children on an open shard), the
   * shard ends ('ended'), or the shard turned out closed and its rest is left to GetRecords ('closed').
   */
  async #read(
    events: AsyncIterable<ShardEvent>,
    subscription: AbortController,
    backoff: Backoff,
  ): Promise<'again' | 'empty' | 'doubted' | 'ended' | 'closed'> {
    const options = this.#options;
    const { clock } = options;
    const signal = this.#controller.signal;
    const subscribedAt = clock.monotonicNow();
    let eventCount = 0;
    const iterator = events[Symbol.asyncIterator]();
    try {
      for (;;) {
        await this.#drained();
        if (signal.aborted) return 'again';
        if (clock.monotonicNow() - subscribedAt >= options.subscriptionLifetimeMs) {
          options.onIssue?.({ kind: 'renewed', operation: 'SubscribeToShard', error: null, backoffMs: 0 });
          return 'again';
        }
        const waitStarted = clock.monotonicNow();
        const next = await this.#nextOrIdle(iterator, subscription);
        if (next === 'idle') {
          options.onIssue?.({ kind: 'idle', operation: 'SubscribeToShard', error: null, backoffMs: 0 });
          return 'again';
        }
        if (next.done === true) return eventCount === 0 ? 'empty' : 'again';
        eventCount += 1;
        backoff.reset();
        const event = next.value;
        const records = this.#unseen(event.records);
        options.onEvent?.(clock.monotonicNow() - waitStarted, records.length);
        if (event.continuationSequenceNumber === null && event.childShards.length === 0) {
          // An end without children: believed only when ListShards shows the shard closed (then its
          // rest is read by GetRecords, which finds the children); an open shard is subscribed again.
          this.#push({ records, millisBehindLatest: event.millisBehindLatest, shardEnd: null });
          if (!(await this.#closed())) return 'doubted';
          this.#readRestByPolling();
          return 'closed';
        }
        if (event.continuationSequenceNumber === null) {
          this.#push({
            records,
            millisBehindLatest: event.millisBehindLatest,
            shardEnd: { childShards: event.childShards, gone: false },
          });
          this.#ended = true;
          this.#wakeConsumer?.();
          return 'ended';
        }
        this.#continuation = event.continuationSequenceNumber;
        this.#push({
          records,
          millisBehindLatest: event.millisBehindLatest,
          shardEnd: null,
          ...(event.records.length === 0 ? { position: event.continuationSequenceNumber } : {}),
        });
        if (
          records.length === 0 &&
          clock.monotonicNow() - this.#lastClosedCheck >= options.closedShardCheckIntervalMs
        ) {
          this.#lastClosedCheck = clock.monotonicNow();
          if (await this.#closed()) {
            this.#readRestByPolling();
            return 'closed';
          }
        }
      }
    } finally {
      subscription.abort();
      void iterator.return?.().catch(() => undefined);
    }
  }

  /** The iterator's next event, or 'idle' when none came within the idle timeout (the subscription is then ended). */
  async #nextOrIdle(
    iterator: AsyncIterator<ShardEvent>,
    subscription: AbortController,
  ): Promise<IteratorResult<ShardEvent> | 'idle'> {
    const { clock, idleTimeoutMs } = this.#options;
    const timer = new AbortController();
    const pending = iterator.next();
    // Ended as idle, the subscription's read fails later: nobody waits for it then.
    pending.catch(() => undefined);
    try {
      return await Promise.race([
        pending,
        clock.sleep(idleTimeoutMs, timer.signal).then(() => {
          if (timer.signal.aborted) return new Promise<never>(() => {});
          subscription.abort();
          return 'idle' as const;
        }),
      ]);
    } finally {
      timer.abort();
    }
  }

  async #onFailure(error: unknown, backoff: Backoff): Promise<void> {
    const options = this.#options;
    const name = (error as { name?: string } | null)?.name;
    if (name === 'ResourceInUseException') {
      const delay = Math.max(RESOURCE_IN_USE_WAIT_MS, backoff.next());
      options.onIssue?.({ kind: 'resource-in-use', operation: 'SubscribeToShard', error, backoffMs: delay });
      await options.clock.sleep(delay, this.#controller.signal);
      return;
    }
    const kind = classifyKinesisError(error);
    if (kind === 'not-found') {
      // The shard (or stream) is gone — or the consumer is: that is not the shard's end.
      if (await this.#shardListed()) {
        options.onConsumerGone?.();
        throw new KclError(
          'STREAM_CONSUMER_GONE',
          `@kcl/consumer: SubscribeToShard on ${options.shardId} found no stream consumer ${options.consumerArn} (deregistered?); it is registered again`,
          { retryable: true, cause: error },
        );
      }
      this.#push({ records: [], millisBehindLatest: 0, shardEnd: { childShards: [], gone: true } });
      this.#ended = true;
      this.#wakeConsumer?.();
      this.#controller.abort();
      return;
    }
    if (kind === 'fatal') throw error;
    const delay = backoff.next();
    options.onIssue?.({ kind, operation: 'SubscribeToShard', error, backoffMs: delay });
    await options.clock.sleep(delay, this.#controller.signal);
  }

  /**
   * Where the next subscription starts: after the last record delivered (never past a record not yet
   * delivered); before any, after the last continuation (so a LATEST start does not move on), else
   * the start.
   */
  #position(): IteratorPosition {
    const after = this.#lastSequenceText ?? this.#continuation;
    return after === null ? this.#options.start : { type: 'AFTER_SEQUENCE_NUMBER', sequenceNumber: after };
  }

  /** The event's records after the last one delivered (a renewed subscription may repeat some). */
  #unseen(records: readonly KinesisSdkRecord[]): readonly KinesisSdkRecord[] {
    const last = this.#lastSequenceNumber;
    const fresh =
      last === null
        ? records
        : records.filter(
            (record) => record.SequenceNumber === undefined || BigInt(record.SequenceNumber) > last,
          );
    const newest = fresh.at(-1)?.SequenceNumber;
    if (newest !== undefined) {
      this.#lastSequenceNumber = BigInt(newest);
      this.#lastSequenceText = newest;
    }
    return fresh;
  }

  async #closed(): Promise<boolean> {
    try {
      const shards = await this.#options.stream.listShards(undefined, this.#controller.signal);
      const shard = shards.find((candidate) => candidate.ShardId === this.#options.shardId);
      return shard?.SequenceNumberRange?.EndingSequenceNumber !== undefined;
    } catch {
      return false;
    }
  }

  async #shardListed(): Promise<boolean> {
    const shards = await this.#options.stream.listShards(undefined, this.#controller.signal);
    return shards.some((shard) => shard.ShardId === this.#options.shardId);
  }

  /** The shard is closed but the subscription does not end it: GetRecords reads the rest, to its end. */
  #readRestByPolling(): void {
    const options = this.#options;
    options.onIssue?.({
      kind: 'closed-without-children',
      operation: 'SubscribeToShard',
      error: null,
      backoffMs: 0,
    });
    const tail = new RecordFetcher({
      stream: options.stream,
      shardId: options.shardId,
      start: this.#position(),
      maxRecords: options.polling.maxRecords,
      pollIntervalMs: options.polling.pollIntervalMs,
      minCallSpacingMs: 200,
      clock: options.clock,
      random: options.random,
      backoff: options.backoff,
      onIssue: (issue: FetchIssue) =>
        options.onIssue?.({
          kind: issue.kind === 'shard-end-without-children' ? 'closed-without-children' : issue.kind,
          operation: 'GetRecords',
          error: issue.error,
          backoffMs: issue.backoffMs,
        }),
      ...(options.onGetRecords === undefined ? {} : { onCall: options.onGetRecords }),
    });
    this.#tail = tail;
    tail.start();
    this.#wakeConsumer?.();
  }

  /** Resolves once the consumer has taken every buffered event (or the subscriber stops). */
  async #drained(): Promise<void> {
    while (this.#buffered.length > 0 && !this.#controller.signal.aborted) {
      await new Promise<void>((resolve) => {
        this.#wakeProducer = resolve;
      });
      this.#wakeProducer = null;
    }
  }

  #push(batch: FetchedBatch): void {
    this.#buffered.push(batch);
    this.#wakeConsumer?.();
  }
}
