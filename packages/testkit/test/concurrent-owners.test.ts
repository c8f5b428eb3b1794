import { describe, expect, it } from 'vitest';
import { concurrentOwners, type ProcessingSpan } from '../src/index.js';

const span = (workerId: string, shardId: string, startedAt: number, endedAt: number): ProcessingSpan => ({
  workerId,
  shardId,
  startedAt,
  endedAt,
});

describe('concurrentOwners', () => {
  it('accepts one worker after another on a shard, and two workers at once on different shards', () => {
    expect(
      concurrentOwners([
        span('a', 's1', 0, 10),
        span('a', 's1', 12, 20),
        span('b', 's1', 20, 30),
        span('b', 's2', 0, 30),
        span('a', 's2', 31, 40),
      ]),
    ).toEqual([]);
  });

  it('reports a worker that starts on a shard before the previous owner’s last batch ended', () => {
    expect(
      concurrentOwners([span('a', 's1', 0, 10), span('b', 's1', 15, 25), span('a', 's1', 12, 18)]),
    ).toEqual(['s1: a until 18 ms, b from 15 ms']);
  });

  it('reports each overlapping change of owner, in any input order', () => {
    expect(
      concurrentOwners([span('c', 's1', 40, 50), span('b', 's1', 20, 45), span('a', 's1', 0, 25)]),
    ).toEqual(['s1: a until 25 ms, b from 20 ms', 's1: b until 45 ms, c from 40 ms']);
  });
});
