#!/usr/bin/env node
import { runKclMigrate } from './kcl-migrate.js';

// The AWS SDK warns about Node 20 on every run; the tool's output should stay readable.
process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';

const interrupt = new AbortController();
process.on('SIGINT', () => {
  if (interrupt.signal.aborted) process.exit(130);
  process.stderr.write('\nkcl-migrate: stopping after the writes in flight (Ctrl-C again to quit at once)\n');
  interrupt.abort();
});

process.exitCode = await runKclMigrate(process.argv, process, interrupt.signal);
