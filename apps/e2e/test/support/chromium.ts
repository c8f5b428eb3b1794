import { existsSync } from 'node:fs';
import { isCi } from '@kcl/testkit';

const CANDIDATES = ['/usr/bin/chromium', '/usr/bin/chromium-browser', '/usr/bin/google-chrome'];

export interface ChromiumCheck {
  /** The browser to drive, or null when there is none. */
  readonly executablePath: string | null;
  /** Why the browser tests are skipped; null when a browser was found. */
  readonly reason: string | null;
}

/**
 * The system's Chromium (Debian's `chromium` package; `KCL_CHROMIUM` names another), driven by
 * playwright-core, which never downloads a browser of its own. Missing: a visible skip locally that
 * says how to install it, a failure in CI (.ci/run installs it).
 */
export function findChromium(): ChromiumCheck {
  const given = process.env.KCL_CHROMIUM;
  const executablePath = [given, ...CANDIDATES].find(
    (candidate): candidate is string => candidate !== undefined && candidate !== '' && existsSync(candidate),
  );
  if (executablePath !== undefined) return { executablePath, reason: null };
  const reason =
    'no Chromium found (looked for KCL_CHROMIUM, /usr/bin/chromium, chromium-browser, google-chrome): install it with `apt-get install -y chromium`';
  if (isCi())
    throw new Error(`${reason}. CI must provide it (.ci/run installs it); failing instead of skipping.`);
  process.stderr.write(`\n[skip] ${reason} — the dashboard browser test is skipped (it would fail in CI)\n`);
  return { executablePath: null, reason };
}
