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
