import { ExtendedSequenceNumber } from '@kcl/core';

/** The lease key of shard `n`, as Kinesis names shards. */
export function shardId(n: number): string {
  return `shardId-${String(n).padStart(12, '0')}`;
}

/** A checkpoint at a sequence number. */
export const sequence = ExtendedSequenceNumber.of;

/** A sequence number as long as Kinesis gives them (56 digits). */
export const LONG_SEQUENCE = '49590338271490256608559692538361571095921575989136588898';

/** Runs `run` over `items`, `size` at a time (enough concurrency to be quick, not enough to flood a server). */
export async function inBatches<T>(
  items: readonly T[],
  size: number,
  run: (item: T) => Promise<unknown>,
): Promise<void> {
  for (let index = 0; index < items.length; index += size) {
    await Promise.all(items.slice(index, index + size).map(run));
  }
}
