export interface ServiceCheck {
  readonly available: boolean;
  /** Why the service is not usable; null when it is. */
  readonly reason: string | null;
}

/** True when running in CI, where a missing service must fail the run instead of skipping tests. */
export function isCi(): boolean {
  const value = process.env.CI;
  return value !== undefined && value !== '' && value !== '0' && value.toLowerCase() !== 'false';
}

/**
 * Probes a service a test file needs (a database server, say). When it answers, tests run. When it
 * does not: in CI this throws, failing the run; locally it prints why the tests will be skipped and
 * returns `available: false`, so the skip is visible.
 */
export async function checkService(
  name: string,
  probe: () => Promise<unknown>,
  options: { readonly timeoutMs?: number } = {},
): Promise<ServiceCheck> {
  const timeoutMs = options.timeoutMs ?? 10_000;
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([
      probe(),
      new Promise((_, reject) => {
        timer = setTimeout(() => reject(new Error(`no answer within ${timeoutMs} ms`)), timeoutMs);
      }),
    ]);
    return { available: true, reason: null };
  } catch (error) {
    const reason = `${name} is not reachable: ${error instanceof Error ? error.message : String(error)}`;
    if (isCi()) {
      throw new Error(`@kcl/testkit: ${reason}. CI must provide it; failing instead of skipping.`, {
        cause: error,
      });
    }
    process.stderr.write(`\n[skip] ${reason} — its tests are skipped (they would fail in CI)\n`);
    return { available: false, reason };
  } finally {
    clearTimeout(timer);
  }
}
