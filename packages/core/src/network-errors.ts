/**
 * The codes of a connection that could not be made or broke off: Node's socket and DNS errors and
 * undici's. Whatever the service (Kinesis, DynamoDB, a SQL server), such a failure says nothing about
 * the request and usually passes, so every kcl package treats these codes as retryable. Drivers with
 * codes of their own (mysql2's `PROTOCOL_CONNECTION_LOST`, …) add them in their error mapping.
 */
export const NETWORK_ERROR_CODES: ReadonlySet<string> = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ECONNABORTED',
  'ETIMEDOUT',
  'ESOCKETTIMEDOUT',
  'EPIPE',
  'EHOSTUNREACH',
  'EHOSTDOWN',
  'ENETUNREACH',
  'ENETDOWN',
  'EAI_AGAIN',
  'ENOTFOUND',
  'UND_ERR_SOCKET',
  'UND_ERR_CONNECT_TIMEOUT',
]);

const MAX_CAUSE_DEPTH = 8;

/**
 * True when `error` carries one of `NETWORK_ERROR_CODES` in its `code`, or an error it wraps does
 * (its `cause` chain, or the `errors` of an `AggregateError`, which Node throws when every address of
 * a host refused the connection).
 */
export function isNetworkError(error: unknown): boolean {
  return hasNetworkCode(error, 0);
}

function hasNetworkCode(error: unknown, depth: number): boolean {
  if (depth > MAX_CAUSE_DEPTH || typeof error !== 'object' || error === null) return false;
  const { code, cause, errors } = error as { code?: unknown; cause?: unknown; errors?: unknown };
  if (typeof code === 'string' && NETWORK_ERROR_CODES.has(code)) return true;
  if (Array.isArray(errors) && errors.some((inner) => hasNetworkCode(inner, depth + 1))) return true;
  return hasNetworkCode(cause, depth + 1);
}
