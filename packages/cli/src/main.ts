#!/usr/bin/env node
import { runKcl } from './kcl.js';

// The AWS SDK warns about Node 20 on every run; the tool's output should stay readable.
process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';

const interrupt = new AbortController();
process.on('SIGINT', () => {
  if (interrupt.signal.aborted) process.exit(130);
  process.stderr.write('\nkcl: stopping (Ctrl-C again to quit at once)\n');
  interrupt.abort();
});
process.on('SIGTERM', () => interrupt.abort());

process.exitCode = await runKcl(process.argv, process, interrupt.signal);
