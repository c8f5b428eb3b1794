import {
  DeregisterStreamConsumerCommand,
  DescribeStreamConsumerCommand,
  DescribeStreamSummaryCommand,
  type KinesisClient,
  RegisterStreamConsumerCommand,
} from '@aws-sdk/client-kinesis';
import type { Clock, RandomSource } from '@kcl/core';
import { KclError, systemClock, systemRandom } from '@kcl/core';
import { Backoff } from '../backoff.js';
import { classifyKinesisError } from './kinesis-errors.js';
import type { StreamIdentity } from './kinesis-stream.js';

export interface StreamConsumerOptions {
  readonly kinesis: KinesisClient;
  /** The stream, by name or ARN. */
  readonly stream: StreamIdentity;
  /** The registered consumer's name (the Java KCL uses the application name). */
  readonly consumerName: string;
  /**
   * A consumer registered elsewhere, used as it is: it must be a consumer of `stream` (checked), and
   * it is waited for until ACTIVE but never registered.
   */
  readonly consumerArn?: string;
  /** How long to wait for the consumer to become ACTIVE. Default 300 000 (Kinesis takes seconds). */
  readonly timeoutMs?: number;
  readonly clock?: Clock;
  readonly random?: RandomSource;
  readonly signal?: AbortSignal;
  /** Told of each wait (registering, waiting for ACTIVE, retrying after a throttle). */
  readonly onProgress?: (status: string, delayMs: number) => void;
}

/** A registered stream consumer. */
export interface StreamConsumer {
  readonly consumerName: string;
  readonly consumerArn: string;
  readonly streamArn: string;
}

interface Described {
  readonly status: string;
  readonly consumerArn: string;
  readonly consumerName: string;
  readonly streamArn: string | null;
}

/**
 * Makes sure `consumerName` is a registered, ACTIVE consumer of the stream (enhanced fan-out) and
 * returns its ARN: an ACTIVE consumer is used at once; a missing one is registered
 * (RegisterStreamConsumer) and waited for; one being created is waited for; one being deleted is
 * waited out and registered again. Several workers may call this at once: a registration that finds
 * the name taken (ResourceInUse) waits for the other's. Throttling (LimitExceeded: DescribeStreamConsumer
 * allows 20 calls per second per stream, RegisterStreamConsumer 5) backs off with jitter. With
 * `consumerArn`, that consumer is checked to belong to the stream and waited for, never registered.
 */
export async function ensureStreamConsumer(options: StreamConsumerOptions): Promise<StreamConsumer> {
  const clock = options.clock ?? systemClock;
  const random = options.random ?? systemRandom;
  const timeoutMs = options.timeoutMs ?? 300_000;
  const give = clock.monotonicNow() + timeoutMs;
  const backoff = new Backoff({ initialMs: 500, maxMs: 5_000, random });
  const { kinesis, consumerName, signal } = options;
  const given = options.consumerArn ?? null;
  let streamArn: string | null = null;
  for (;;) {
    let status: string;
    try {
      streamArn ??= await streamArnOf(options);
      const described = await describe(kinesis, streamArn, given ?? consumerName, signal, given !== null);
      if (given !== null) {
        if (described === null) throw consumerNotFound(given);
        if (described.streamArn !== null && described.streamArn !== streamArn) {
          throw new KclError(
            'STREAM_CONSUMER_MISMATCH',
            `@kcl/consumer: retrieval.consumerArn ${given} is a consumer of ${described.streamArn}, not of ${streamArn}; give a consumer of the stream this application reads`,
          );
        }
      }
      if (described?.status === 'ACTIVE') {
        return { consumerName: described.consumerName, consumerArn: described.consumerArn, streamArn };
      }
      if (described === null) {
        await kinesis.send(
          new RegisterStreamConsumerCommand({ StreamARN: streamArn, ConsumerName: consumerName }),
          {
            ...(signal === undefined ? {} : { abortSignal: signal }),
          },
        );
        status = 'registered';
      } else {
        status = described.status.toLowerCase();
      }
    } catch (error) {
      const name = (error as { name?: string } | null)?.name;
      if (KclError.is(error) && !error.retryable) throw error;
      // The stream does not exist (DescribeStreamSummary, RegisterStreamConsumer): no wait mends that.
      if (name === 'ResourceNotFoundException') throw error;
      // Registered by another worker meanwhile: wait for it like our own.
      if (name === 'ResourceInUseException') status = 'registered elsewhere';
      else if (name === 'LimitExceededException') status = 'throttled, or the stream has its 20 consumers';
      else if (classifyKinesisError(error) === 'fatal') throw error;
      else status = 'retrying after a failure';
    }
    const delay = backoff.next();
    if (signal?.aborted) throw signal.reason ?? stopped();
    if (clock.monotonicNow() + delay > give) {
      throw new KclError(
        'STREAM_CONSUMER_NOT_ACTIVE',
        `@kcl/consumer: the stream consumer '${given ?? consumerName}' of ${streamArn ?? streamNameOf(options.stream)} did not become ACTIVE within ${timeoutMs} ms (last seen: ${status}); check it with DescribeStreamConsumer, and ListStreamConsumers for the limit of 20 per stream`,
        { retryable: true },
      );
    }
    options.onProgress?.(status, delay);
    await clock.sleep(delay, signal);
  }
}

/**
 * Deregisters the stream consumer `consumerName` (it stops costing; every subscription of it ends).
 * False when there was none. It is gone once DescribeStreamConsumer no longer finds it (seconds).
 */
export async function deregisterStreamConsumer(
  options: Pick<StreamConsumerOptions, 'kinesis' | 'stream' | 'consumerName' | 'signal'>,
): Promise<boolean> {
  const streamArn = await streamArnOf(options);
  try {
    await options.kinesis.send(
      new DeregisterStreamConsumerCommand({ StreamARN: streamArn, ConsumerName: options.consumerName }),
      { ...(options.signal === undefined ? {} : { abortSignal: options.signal }) },
    );
    return true;
  } catch (error) {
    if ((error as { name?: string } | null)?.name === 'ResourceNotFoundException') return false;
    throw error;
  }
}

async function streamArnOf(
  options: Pick<StreamConsumerOptions, 'kinesis' | 'stream' | 'signal'>,
): Promise<string> {
  if ('streamArn' in options.stream) return options.stream.streamArn;
  const summary = await options.kinesis.send(
    new DescribeStreamSummaryCommand({ StreamName: options.stream.streamName }),
    { ...(options.signal === undefined ? {} : { abortSignal: options.signal }) },
  );
  const arn = summary.StreamDescriptionSummary?.StreamARN;
  if (arn === undefined) {
    throw new KclError(
      'KINESIS_NO_STREAM_ARN',
      `@kcl/consumer: DescribeStreamSummary of ${options.stream.streamName} returned no StreamARN`,
      { retryable: true },
    );
  }
  return arn;
}

async function describe(
  kinesis: KinesisClient,
  streamArn: string,
  consumer: string,
  signal: AbortSignal | undefined,
  byArn: boolean,
): Promise<Described | null> {
  try {
    const output = await kinesis.send(
      new DescribeStreamConsumerCommand(
        byArn ? { ConsumerARN: consumer } : { StreamARN: streamArn, ConsumerName: consumer },
      ),
      { ...(signal === undefined ? {} : { abortSignal: signal }) },
    );
    const description = output.ConsumerDescription;
    if (description?.ConsumerARN === undefined) return null;
    return {
      status: description.ConsumerStatus ?? 'CREATING',
      consumerArn: description.ConsumerARN,
      consumerName: description.ConsumerName ?? consumer,
      streamArn: description.StreamARN ?? null,
    };
  } catch (error) {
    if ((error as { name?: string } | null)?.name === 'ResourceNotFoundException') return null;
    throw error;
  }
}

function consumerNotFound(consumerArn: string): KclError {
  return new KclError(
    'STREAM_CONSUMER_NOT_FOUND',
    `@kcl/consumer: the stream consumer ${consumerArn} (retrieval.consumerArn) does not exist; register it, or give retrieval.consumerName to have it registered`,
  );
}

function streamNameOf(stream: StreamIdentity): string {
  return 'streamName' in stream ? stream.streamName : stream.streamArn;
}

function stopped(): KclError {
  return new KclError('CONSUMER_STOPPED', '@kcl/consumer: stopped while waiting for the stream consumer');
}
