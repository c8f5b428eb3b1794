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
}

/**
 * Makes sure `consumerName` is a registered, ACTIVE consumer of the stream (enhanced fan-out) and
 * returns its ARN: an ACTIVE consumer is used at once; a missing one is registered
 * (RegisterStreamConsumer) and waited for; one being created is waited for; one being deleted is
 * waited out and registered again. Several workers may call this at once: a registration that finds
 * the name taken (ResourceInUse) waits for the other's. Throttling (LimitExceeded: DescribeStreamConsumer
 * allows 20 calls per second per stream, RegisterStreamConsumer 5) backs off with jitter.
 */
export async function ensureStreamConsumer(options: StreamConsumerOptions): Promise<StreamConsumer> {
  const clock = options.clock ?? systemClock;
  const random = options.random ?? systemRandom;
  const timeoutMs = options.timeoutMs ?? 300_000;
  const give = clock.monotonicNow() + timeoutMs;
  const backoff = new Backoff({ initialMs: 500, maxMs: 5_000, random });
  const streamArn = await streamArnOf(options);
  const { kinesis, consumerName, signal } = options;
  for (;;) {
    let status: string;
    try {
      const described = await describe(kinesis, streamArn, consumerName, signal);
      if (described?.status === 'ACTIVE') {
        return { consumerName, consumerArn: described.consumerArn, streamArn };
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
      // Registered by another worker meanwhile: wait for it like our own.
      if (name === 'ResourceInUseException') status = 'registered elsewhere';
      else if (classifyKinesisError(error) === 'fatal' && name !== 'LimitExceededException') throw error;
      else status = 'retrying';
    }
    const delay = backoff.next();
    if (signal?.aborted) throw signal.reason ?? stopped();
    if (clock.monotonicNow() + delay > give) {
      throw new KclError(
        'STREAM_CONSUMER_NOT_ACTIVE',
        `@kcl/consumer: the stream consumer '${consumerName}' of ${streamArn} did not become ACTIVE within ${timeoutMs} ms (last seen: ${status}); check it with DescribeStreamConsumer`,
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
  consumerName: string,
  signal: AbortSignal | undefined,
): Promise<Described | null> {
  try {
    const output = await kinesis.send(
      new DescribeStreamConsumerCommand({ StreamARN: streamArn, ConsumerName: consumerName }),
      { ...(signal === undefined ? {} : { abortSignal: signal }) },
    );
    const description = output.ConsumerDescription;
    if (description?.ConsumerARN === undefined) return null;
    return { status: description.ConsumerStatus ?? 'CREATING', consumerArn: description.ConsumerARN };
  } catch (error) {
    if ((error as { name?: string } | null)?.name === 'ResourceNotFoundException') return null;
    throw error;
  }
}

function stopped(): KclError {
  return new KclError('CONSUMER_STOPPED', '@kcl/consumer: stopped while waiting for the stream consumer');
}
