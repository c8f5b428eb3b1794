#!/usr/bin/env node
import { parseArgs } from 'node:util';
import type { ProcessorKind } from '../simulated-processors.js';

// The AWS SDK warns about Node 20 once per process; the simulation sends nothing to AWS.
process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';
const { runFleetSimulation } = await import('../fleet-simulation.js');
const { ALL_PROCESSOR_KINDS: PROCESSOR_KINDS } = await import('../simulated-processors.js');

const USAGE = `usage: kcl-sim [--seed N | --from A --to B | --runs N] [--processor KIND] [--streams N] [--sessions | --no-sessions] [--story]

  --seed N         run one seed and print its story (what was scheduled and what the fleet did)
  --from A --to B  run seeds A..B (inclusive); a failing seed prints its story
  --runs N         run seeds 1..N (the long mode: --runs 100000)
  --processor KIND one of ${PROCESSOR_KINDS.join(', ')} (default: chosen by each seed)
  --streams N      one application reading N streams (N >= 2) through a stream tracker whose list
                   the schedule changes: streams added and dropped, former streams' leases deleted
  --sessions       every run with session liveness (the store offers database sessions; the schedule
                   ends them: processes dying, machines vanishing, cut connections, database restarts)
  --no-sessions    no run with it (default: chosen by each seed, about half the runs)
  --story          print the story of passing seeds too
  --trace KEY      add every handling of the records of partition key KEY to the story
`;

const { values } = parseArgs({
  options: {
    seed: { type: 'string' },
    from: { type: 'string' },
    to: { type: 'string' },
    runs: { type: 'string' },
    processor: { type: 'string' },
    streams: { type: 'string' },
    sessions: { type: 'boolean' },
    trace: { type: 'string' },
    story: { type: 'boolean', default: false },
    help: { type: 'boolean', default: false },
  },
  allowNegative: true,
});

if (values.help) {
  process.stdout.write(USAGE);
  process.exit(0);
}

function integer(name: string, text: string | undefined, fallback: number): number {
  if (text === undefined) return fallback;
  const value = Number(text);
  if (!Number.isSafeInteger(value) || value < 0) {
    process.stderr.write(
      `kcl-sim: --${name} must be a non-negative integer, got ${JSON.stringify(text)}\n${USAGE}`,
    );
    process.exit(2);
  }
  return value;
}

let from: number;
let to: number;
if (values.seed !== undefined) {
  from = integer('seed', values.seed, 1);
  to = from;
} else if (values.runs !== undefined) {
  from = 1;
  to = integer('runs', values.runs, 500);
} else {
  from = integer('from', values.from, 1);
  to = integer('to', values.to, from + 99);
}
const processor = values.processor as ProcessorKind | undefined;
if (processor !== undefined && !PROCESSOR_KINDS.includes(processor)) {
  process.stderr.write(`kcl-sim: --processor must be one of ${PROCESSOR_KINDS.join(', ')}\n`);
  process.exit(2);
}

const streams = integer('streams', values.streams, 1);
if (streams < 1) {
  process.stderr.write(`kcl-sim: --streams must be at least 1\n${USAGE}`);
  process.exit(2);
}

const single = from === to;
let failed = 0;
const started = performance.now();
for (let seed = from; seed <= to; seed++) {
  const result = await runFleetSimulation({
    seed,
    ...(processor === undefined ? {} : { processor }),
    ...(values.trace === undefined ? {} : { traceKey: values.trace }),
    ...(streams === 1 ? {} : { streams }),
    ...(values.sessions === undefined ? {} : { sessions: values.sessions }),
  });
  const ok = result.violations.length === 0;
  if (!ok) failed += 1;
  if (!ok || single || values.story) {
    process.stdout.write(
      `\n── seed ${seed} (${result.processor}, ${result.stores}): ${ok ? 'ok' : `${result.violations.length} violation(s)`}\n`,
    );
    for (const line of result.story) process.stdout.write(`${line}\n`);
    for (const violation of result.violations) {
      process.stdout.write(`  ✗ ${violation.invariant} at ${violation.at} ms: ${violation.message}\n`);
    }
    const { stats } = result;
    process.stdout.write(
      `  produced ${stats.produced}, duplicates ${stats.duplicates}, workers ${stats.workers}, crashes ${stats.crashes}, graceful stops ${stats.gracefulStops}, splits ${stats.splits}, merges ${stats.merges}, ${stats.steps} steps over ${stats.simulatedMs} simulated ms\n`,
    );
    if (result.streams !== undefined) {
      const { count, added, removed, deleted, recreated, longestWaitMs } = result.streams;
      process.stdout.write(
        `  ${count} streams: ${added} added to the list, ${removed} dropped, ${deleted} former streams' leases deleted, ${recreated} re-created after deletion; the longest a record waited for its first handling: ${Math.round(longestWaitMs)} ms\n`,
      );
    }
    if (result.sessions !== undefined) {
      const { livenessCheckIntervalMs, restarts, cuts, deadOwnerTakes } = result.sessions;
      process.stdout.write(
        `  sessions checked every ${livenessCheckIntervalMs} ms: ${restarts} database restart(s), ${cuts} cut connection(s), ${deadOwnerTakes} lease(s) taken from owners judged dead\n`,
      );
    }
    if (!ok) {
      const option = `${streams === 1 ? '' : ` --streams ${streams}`}${values.sessions === undefined ? '' : values.sessions ? ' --sessions' : ' --no-sessions'}`;
      process.stdout.write(
        `  re-run alone: npx pnpm@10.34.9 --filter @kcl/simulation sim --seed ${seed}${option}\n`,
      );
    }
  }
  if (!single && (seed - from + 1) % 100 === 0) {
    const seconds = ((performance.now() - started) / 1_000).toFixed(0);
    process.stderr.write(
      `kcl-sim: ${seed - from + 1}/${to - from + 1} seeds, ${failed} failing, ${seconds} s\n`,
    );
  }
}
const seconds = ((performance.now() - started) / 1_000).toFixed(1);
process.stdout.write(
  `\nkcl-sim: seeds ${from}..${to}: ${to - from + 1 - failed} passed, ${failed} failed (${seconds} s)\n`,
);
process.exit(failed === 0 ? 0 : 1);
