import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    testTimeout: 300_000,
    hookTimeout: 90_000,
    // Each file runs a fleet of worker processes and an emulator: one file at a time keeps timings honest on 2 cores.
    fileParallelism: false,
    env: { AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true' },
  },
});
