#!/usr/bin/env node
// The installed command. It exists before the build (a fresh workspace install links it without
// a warning) and runs the compiled CLI, which `pnpm run build` writes to dist/.
import '../dist/main.js';
