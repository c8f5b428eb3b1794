import type { KinesisClient } from '@aws-sdk/client-kinesis';

/**
 * - `exists`: the stream the leases name is there.
 * - `deleted`: no stream of that name.
 * - `recreated`: a stream of that name exists, created at another time: the leases' stream was deleted.
 * - `unknown`: Kinesis could not say (the message is kept).
 */
export type StreamPresence =
  | { readonly stream: string; readonly presence: 'exists' | 'deleted' | 'recreated' }
  | { readonly stream: string; readonly presence: 'unknown'; readonly problem: string };

/**
 * Whether the streams of a multi-stream application's leases still exist. A stream identifier is
 * `account:streamName:creationEpoch` (the Java KCL's form); the stream is looked up by name in the
 * client's account and region, and its creation time (in seconds) must match the identifier's.
 */
export async function checkStreamPresence(
  kinesis: Pick<KinesisClient, 'send'>,
  streamIdentifiers: readonly string[],
): Promise<StreamPresence[]> {
  const { DescribeStreamSummaryCommand } = await import('@aws-sdk/client-kinesis');
  return Promise.all(
    [...new Set(streamIdentifiers)].map(async (stream): Promise<StreamPresence> => {
      const parts = stream.split(':');
      if (parts.length < 3)
        return { stream, presence: 'unknown', problem: 'not an account:stream:epoch identifier' };
      const name = parts[parts.length - 2] as string;
      const epoch = Number(parts[parts.length - 1]);
      try {
        const { StreamDescriptionSummary: summary } = await kinesis.send(
          new DescribeStreamSummaryCommand({ StreamName: name }),
        );
        const created = summary?.StreamCreationTimestamp;
        if (created === undefined || !Number.isFinite(epoch)) return { stream, presence: 'exists' };
        return { stream, presence: Math.floor(created.getTime() / 1_000) === epoch ? 'exists' : 'recreated' };
      } catch (error) {
        if ((error as { name?: string }).name === 'ResourceNotFoundException')
          return { stream, presence: 'deleted' };
        return {
          stream,
          presence: 'unknown',
          problem: error instanceof Error ? error.message : String(error),
        };
      }
    }),
  );
}

/** How long a stream's presence is taken as known (`StreamPresenceCache`). */
export const STREAM_PRESENCE_MAX_AGE_MS = 60_000;

/**
 * `checkStreamPresence` for repeated reads (the dashboard, `kcl status --watch`): each stream's answer
 * is kept for `maxAgeMs`, so reading every couple of seconds does not call DescribeStreamSummary (limited
 * to 20 calls a second per account) for every stream every time. An `unknown` answer is not kept.
 */
export class StreamPresenceCache {
  readonly #kinesis: Pick<KinesisClient, 'send'>;
  readonly #now: () => number;
  readonly #maxAgeMs: number;
  readonly #known = new Map<string, { readonly presence: StreamPresence; readonly at: number }>();

  /** `now`: a clock in milliseconds (monotonic where there is one). */
  constructor(
    kinesis: Pick<KinesisClient, 'send'>,
    now: () => number,
    maxAgeMs = STREAM_PRESENCE_MAX_AGE_MS,
  ) {
    this.#kinesis = kinesis;
    this.#now = now;
    this.#maxAgeMs = maxAgeMs;
  }

  async check(streamIdentifiers: readonly string[]): Promise<StreamPresence[]> {
    const now = this.#now();
    const unique = [...new Set(streamIdentifiers)];
    const answers = new Map<string, StreamPresence>();
    for (const stream of unique) {
      const known = this.#known.get(stream);
      if (known !== undefined && now - known.at < this.#maxAgeMs) answers.set(stream, known.presence);
    }
    const stale = unique.filter((stream) => !answers.has(stream));
    if (stale.length > 0) {
      for (const presence of await checkStreamPresence(this.#kinesis, stale)) {
        answers.set(presence.stream, presence);
        if (presence.presence === 'unknown') this.#known.delete(presence.stream);
        else this.#known.set(presence.stream, { presence, at: now });
      }
    }
    return unique.flatMap((stream) => answers.get(stream) ?? []);
  }
}
