import { describe, expect, it } from 'vitest';
import { isNetworkError, NETWORK_ERROR_CODES } from './network-errors.js';

function coded(code: string, extra: Record<string, unknown> = {}): Error {
  return Object.assign(new Error(code), { code, ...extra });
}

describe('isNetworkError', () => {
  it('knows the socket, DNS and undici codes', () => {
    for (const code of ['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EAI_AGAIN', 'UND_ERR_SOCKET']) {
      expect(NETWORK_ERROR_CODES.has(code)).toBe(true);
      expect(isNetworkError(coded(code))).toBe(true);
    }
  });

  it('finds the code in a cause chain and in the errors of an AggregateError', () => {
    expect(isNetworkError(new Error('request failed', { cause: coded('ECONNRESET') }))).toBe(true);
    expect(isNetworkError(new AggregateError([new Error('x'), coded('ECONNREFUSED')], 'connect'))).toBe(true);
  });

  it('says no to other errors and to values that are not errors', () => {
    expect(isNetworkError(coded('ER_DUP_ENTRY'))).toBe(false);
    expect(isNetworkError(new Error('boom', { cause: new Error('deeper') }))).toBe(false);
    expect(isNetworkError('ECONNRESET')).toBe(false);
    expect(isNetworkError(null)).toBe(false);
  });

  it('stops at a cause chain that loops', () => {
    const error = coded('EOTHER') as Error & { cause?: unknown };
    error.cause = error;
    expect(isNetworkError(error)).toBe(false);
  });
});
