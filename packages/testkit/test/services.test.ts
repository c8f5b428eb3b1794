import { afterEach, describe, expect, it, vi } from 'vitest';
import { checkService, isCi } from '../src/index.js';

describe('checkService', () => {
  afterEach(() => {
    vi.unstubAllEnvs();
  });

  it('reports an answering service as available', async () => {
    await expect(checkService('thing', async () => 'ok')).resolves.toEqual({ available: true, reason: null });
  });

  it('skips visibly outside CI', async () => {
    vi.stubEnv('CI', '');
    const write = vi.spyOn(process.stderr, 'write').mockImplementation(() => true);
    const result = await checkService('database', async () => {
      throw new Error('ECONNREFUSED');
    });
    expect(result).toEqual({ available: false, reason: 'database is not reachable: ECONNREFUSED' });
    expect(String(write.mock.calls[0]?.[0])).toContain('[skip] database is not reachable');
    write.mockRestore();
  });

  it('fails in CI instead of skipping', async () => {
    vi.stubEnv('CI', 'true');
    expect(isCi()).toBe(true);
    await expect(
      checkService('database', async () => {
        throw new Error('ECONNREFUSED');
      }),
    ).rejects.toThrow(/CI must provide it/);
  });

  it('times out a probe that hangs', async () => {
    vi.stubEnv('CI', '');
    const write = vi.spyOn(process.stderr, 'write').mockImplementation(() => true);
    const result = await checkService('slow', () => new Promise(() => {}), { timeoutMs: 20 });
    expect(result.reason).toContain('no answer within 20 ms');
    write.mockRestore();
  });
});
