import { describe, expect, it } from 'vitest';
import { childLogger, createLineLogger } from './logger.js';

describe('createLineLogger', () => {
  it('filters by level and prints fields as JSON, bigints as strings', () => {
    const lines: string[] = [];
    const logger = createLineLogger({
      write: (line) => lines.push(line),
      level: 'info',
      clock: { now: () => 0 },
      fields: { workerId: 'w1' },
    });
    logger.debug('hidden');
    logger.warn('lease lost', { leaseKey: 'shardId-1', hashKey: 5n });
    expect(lines).toEqual([
      '1970-01-01T00:00:00.000Z WARN  lease lost {"workerId":"w1","leaseKey":"shardId-1","hashKey":"5"}',
    ]);
  });

  it('adds fields in a child logger', () => {
    const lines: string[] = [];
    const logger = childLogger(
      createLineLogger({ write: (line) => lines.push(line), clock: { now: () => 0 } }),
      {
        shardId: 's',
      },
    );
    logger.info('hi');
    expect(lines[0]).toContain('{"shardId":"s"}');
  });
});
