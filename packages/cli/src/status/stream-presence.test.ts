import { describe, expect, it } from 'vitest';
import { StreamPresenceCache } from './stream-presence.js';

/** A Kinesis client answering DescribeStreamSummary from a table, counting the calls. */
function kinesis(created: Record<string, number | 'fail'>) {
  const calls: string[] = [];
  return {
    calls,
    client: {
      send: async (command: { input: { StreamName?: string } }) => {
        const name = command.input.StreamName ?? '';
        calls.push(name);
        const answer = created[name];
        if (answer === 'fail') throw new Error('throttled');
        if (answer === undefined)
          throw Object.assign(new Error('not found'), { name: 'ResourceNotFoundException' });
        return { StreamDescriptionSummary: { StreamCreationTimestamp: new Date(answer * 1_000) } };
      },
    } as never,
  };
}

describe('StreamPresenceCache', () => {
  it('asks Kinesis about each stream once per max age, and again for an answer it could not get', async () => {
    const { client, calls } = kinesis({ orders: 100, flaky: 'fail' });
    let now = 0;
    const cache = new StreamPresenceCache(client, () => now, 60_000);
    const streams = ['1:orders:100', '1:payments:100', '1:flaky:100'];
    const first = await cache.check(streams);
    expect(first.map((entry) => [entry.stream, entry.presence])).toEqual([
      ['1:orders:100', 'exists'],
      ['1:payments:100', 'deleted'],
      ['1:flaky:100', 'unknown'],
    ]);
    expect(calls.sort()).toEqual(['flaky', 'orders', 'payments']);
    calls.length = 0;
    now = 59_999;
    expect((await cache.check(streams)).map((entry) => entry.presence)).toEqual([
      'exists',
      'deleted',
      'unknown',
    ]);
    expect(calls).toEqual(['flaky']);
    calls.length = 0;
    now = 60_000;
    await cache.check(streams);
    expect(calls.sort()).toEqual(['flaky', 'orders', 'payments']);
  });
});
