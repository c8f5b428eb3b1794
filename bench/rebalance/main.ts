import type { Scenario, SimulationResult, TimingProfile } from './fleet-simulator.js';
import { JAVA_TIMING, KCL_TIMING, simulate } from './fleet-simulator.js';

/**
 * Rebalancing benchmark: the kcl planner (@kcl/rebalancer) against a model of the Java KCL 2.x lease
 * taker, on the same simulated fleets. From the repository root:
 *   npx -y pnpm@10.34.9 exec tsx bench/rebalance/main.ts [--seeds 10]
 */

const seedsArgument = process.argv.indexOf('--seeds');
const SEEDS = seedsArgument === -1 ? 10 : Number(process.argv[seedsArgument + 1]);
if (!Number.isSafeInteger(SEEDS) || SEEDS < 1) throw new Error('bench: --seeds needs a positive integer');

function scaleOut(from: number, to: number, leaseCount: number): Scenario {
  return {
    name: `scale out ${from}→${to}`,
    leaseCount,
    initialWorkers: from,
    joiningWorkers: to - from,
    crashingWorkers: 0,
    coldStart: false,
  };
}

function crash(workers: number, leaseCount: number): Scenario {
  const crashing = Math.max(1, Math.floor(workers / 4));
  return {
    name: `crash ${crashing} of ${workers}`,
    leaseCount,
    initialWorkers: workers,
    joiningWorkers: 0,
    crashingWorkers: crashing,
    coldStart: false,
  };
}

function coldStart(workers: number, leaseCount: number): Scenario {
  return {
    name: `cold start, ${workers} workers`,
    leaseCount,
    initialWorkers: 0,
    joiningWorkers: workers,
    crashingWorkers: 0,
    coldStart: true,
  };
}

const SCENARIOS: Scenario[] = [100, 1_000].flatMap((leases) => [
  scaleOut(2, 3, leases),
  scaleOut(4, 8, leases),
  scaleOut(10, 20, leases),
  crash(4, leases),
  crash(8, leases),
  crash(20, leases),
  coldStart(10, leases),
]);

const STEAL_CAPS = [1, 5];

interface Comparison {
  readonly title: string;
  readonly kcl: TimingProfile;
  readonly java: TimingProfile;
  /** Equal timing: the acceptance check (moves and rounds) applies. */
  readonly equal: boolean;
}

const COMPARISONS: Comparison[] = [
  { title: 'Each algorithm at its own default timing', kcl: KCL_TIMING, java: JAVA_TIMING, equal: false },
  { title: 'Equal timing: both at the Java defaults', kcl: JAVA_TIMING, java: JAVA_TIMING, equal: true },
  { title: 'Equal timing: both at the kcl defaults', kcl: KCL_TIMING, java: KCL_TIMING, equal: true },
];

interface Cell {
  readonly moves: number;
  readonly rounds: number | null;
  readonly seconds: number | null;
}

function cellOf(result: SimulationResult, timing: TimingProfile): Cell {
  if (result.convergedAtMs === null) return { moves: result.moves, rounds: null, seconds: null };
  return {
    moves: result.moves,
    rounds: Math.ceil(result.convergedAtMs / timing.rebalanceIntervalMs),
    seconds: result.convergedAtMs / 1_000,
  };
}

function mean(values: readonly (number | null)[]): string {
  if (values.some((value) => value === null)) return 'never';
  const numbers = values as number[];
  const average = numbers.reduce((sum, value) => sum + value, 0) / numbers.length;
  return average >= 100 ? average.toFixed(0) : average.toFixed(1);
}

function atMost(a: number | null, b: number | null): boolean {
  if (a === null) return b === null;
  return b === null || a <= b;
}

const started = performance.now();
const acceptanceFailures: string[] = [];
const defaultTimingNotes: string[] = [];
const lines: string[] = [];
lines.push(
  `${SEEDS} seeds per row, means shown. A round is one rebalance interval of that run; seconds are simulated.`,
);
lines.push(
  'Moves = successful takes after time 0; optimum = fewest moves from the time-0 state to counts within one of each other.',
);
lines.push(
  'The last column counts the seeds where kcl did at least as well as the Java taker: moves · rounds · seconds.',
);
for (const comparison of COMPARISONS) {
  lines.push('');
  lines.push(`### ${comparison.title}`);
  lines.push('');
  lines.push(`kcl: ${comparison.kcl.name}. Java: ${comparison.java.name}.`);
  lines.push('');
  lines.push(
    '| scenario | leases | steal cap | optimum | kcl moves | Java moves | kcl rounds | Java rounds | kcl s | Java s | kcl ≤ Java |',
  );
  lines.push('|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|');
  for (const scenario of SCENARIOS) {
    for (const cap of STEAL_CAPS) {
      const kclCells: Cell[] = [];
      const javaCells: Cell[] = [];
      const optimums: number[] = [];
      let moves = 0;
      let rounds = 0;
      let seconds = 0;
      let worstExtraMoves = 0;
      let worstExtraRounds = 0;
      for (let seed = 1; seed <= SEEDS; seed++) {
        const kcl = simulate({
          algorithm: 'kcl',
          scenario,
          timing: comparison.kcl,
          maxLeasesToSteal: cap,
          seed,
        });
        const java = simulate({
          algorithm: 'java',
          scenario,
          timing: comparison.java,
          maxLeasesToSteal: cap,
          seed,
        });
        const kclCell = cellOf(kcl, comparison.kcl);
        const javaCell = cellOf(java, comparison.java);
        kclCells.push(kclCell);
        javaCells.push(javaCell);
        optimums.push(kcl.optimum);
        if (kclCell.moves <= javaCell.moves) moves += 1;
        worstExtraMoves = Math.max(worstExtraMoves, kclCell.moves - javaCell.moves);
        if (kclCell.rounds !== null && javaCell.rounds !== null) {
          worstExtraRounds = Math.max(worstExtraRounds, kclCell.rounds - javaCell.rounds);
        }
        if (atMost(kclCell.rounds, javaCell.rounds)) rounds += 1;
        if (atMost(kclCell.seconds, javaCell.seconds)) seconds += 1;
      }
      const row = `${scenario.name}, ${scenario.leaseCount} leases, cap ${cap}`;
      if (comparison.equal && (moves < SEEDS || rounds < SEEDS)) {
        acceptanceFailures.push(
          `${comparison.title}: ${row}: kcl ≤ Java in moves ${moves}/${SEEDS} seeds (at worst +${worstExtraMoves}), rounds ${rounds}/${SEEDS} (at worst +${worstExtraRounds})`,
        );
      }
      if (!comparison.equal && (moves < SEEDS || seconds < SEEDS)) {
        defaultTimingNotes.push(
          `${row}: kcl ≤ Java in moves ${moves}/${SEEDS} seeds (at worst +${worstExtraMoves}), seconds ${seconds}/${SEEDS}`,
        );
      }
      lines.push(
        `| ${scenario.name} | ${scenario.leaseCount} | ${cap} | ${mean(optimums)} | ${mean(kclCells.map((c) => c.moves))} | ${mean(javaCells.map((c) => c.moves))} | ${mean(kclCells.map((c) => c.rounds))} | ${mean(javaCells.map((c) => c.rounds))} | ${mean(kclCells.map((c) => c.seconds))} | ${mean(javaCells.map((c) => c.seconds))} | ${moves} · ${rounds} · ${seconds} |`,
      );
    }
  }
}
lines.push('');
lines.push(
  '### Acceptance (equal timing, same steal cap): kcl moves no more leases and needs no more rounds',
);
lines.push('');
if (acceptanceFailures.length === 0) lines.push('Held in every row and every seed.');
for (const failure of acceptanceFailures) lines.push(`- NOT HELD: ${failure}`);
lines.push('');
lines.push('### Each at its own defaults: rows where kcl did worse in some seed (moves or seconds)');
lines.push('');
if (defaultTimingNotes.length === 0) lines.push('None.');
for (const note of defaultTimingNotes) lines.push(`- ${note}`);
lines.push('');
lines.push(`(wall-clock run time: ${((performance.now() - started) / 1_000).toFixed(0)} s)`);
console.log(lines.join('\n'));
