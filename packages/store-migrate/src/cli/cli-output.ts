import type { Lease } from '@kcl/core';
import { systemClock } from '@kcl/core';

/** Where the CLI writes and reads; `process` in production, buffers in tests. */
export interface CliIo {
  readonly stdout: { write(text: string): unknown };
  readonly stderr: { write(text: string): unknown; readonly isTTY?: boolean };
  readonly stdin: NodeJS.ReadableStream & { readonly isTTY?: boolean };
  readonly env: Readonly<Record<string, string | undefined>>;
}

/**
 * Progress on stderr: a redrawn bar on a terminal, a plain line every 10% otherwise (so logs of CI
 * jobs stay readable). Silent when disabled.
 */
export class ProgressReporter {
  readonly #io: CliIo;
  readonly #enabled: boolean;
  readonly #tty: boolean;
  #label = '';
  #lastStep = -1;
  #startedAt = 0;
  #drawn = false;

  constructor(io: CliIo, enabled: boolean) {
    this.#io = io;
    this.#enabled = enabled;
    this.#tty = io.stderr.isTTY === true;
  }

  /** Shows `done` of `total` for `label` (a new label starts a new bar). `unit` names what is counted. */
  update(label: string, done: number, total: number, unit = 'leases'): void {
    if (!this.#enabled) return;
    if (label !== this.#label) {
      this.finish();
      this.#label = label;
      this.#lastStep = -1;
      this.#startedAt = systemClock.monotonicNow();
    }
    const fraction = total <= 0 ? 1 : Math.min(1, done / total);
    const elapsedSeconds = (systemClock.monotonicNow() - this.#startedAt) / 1_000;
    const rate =
      unit === 'leases' && elapsedSeconds > 0.2
        ? `  ${formatCount(Math.round(done / elapsedSeconds))}/s`
        : '';
    const counts =
      unit === 'ms'
        ? `${formatSeconds(done)} of ${formatSeconds(total)}`
        : `${formatCount(done)}/${formatCount(total)} ${unit}`;
    if (this.#tty) {
      const width = 28;
      const filled = Math.round(fraction * width);
      const bar = `${'█'.repeat(filled)}${'░'.repeat(width - filled)}`;
      this.#io.stderr.write(
        `\r\x1b[2K${label.padEnd(10)} ${bar} ${counts} ${Math.floor(fraction * 100)}%${rate}`,
      );
      this.#drawn = true;
      return;
    }
    const step = Math.floor(fraction * 10);
    if (step === this.#lastStep) return;
    this.#lastStep = step;
    this.#io.stderr.write(`${label}: ${counts} (${Math.floor(fraction * 100)}%)${rate}\n`);
  }

  /** Ends the current bar (a newline on a terminal). */
  finish(): void {
    if (this.#drawn) this.#io.stderr.write('\n');
    this.#drawn = false;
    this.#label = '';
  }
}

/** Rows of label/value pairs, labels padded into a column. */
export function formatPairs(rows: ReadonlyArray<readonly [string, string]>, indent = '  '): string {
  const width = Math.max(0, ...rows.map(([label]) => label.length));
  return rows.map(([label, value]) => `${indent}${label.padEnd(width)}  ${value}`).join('\n');
}

/** A table with a header row; columns sized to their widest cell. */
export function formatTable(
  header: readonly string[],
  rows: ReadonlyArray<readonly string[]>,
  indent = '  ',
): string {
  const widths = header.map((title, column) =>
    Math.max(title.length, ...rows.map((row) => (row[column] ?? '').length)),
  );
  const line = (cells: readonly string[]) =>
    `${indent}${cells.map((cell, column) => cell.padEnd(widths[column] ?? 0)).join('  ')}`.trimEnd();
  return [line(header), ...rows.map(line)].join('\n');
}

export function formatCount(value: number): string {
  return value.toLocaleString('en-US');
}

export function formatSeconds(ms: number): string {
  return `${(ms / 1_000).toFixed(1)} s`;
}

export function describeCheckpoint(lease: Lease): string {
  return lease.checkpoint.toString();
}

/** Counts as "WORKER_METRIC_STATS 2, LEADER 1". */
export function formatCounts(counts: Readonly<Record<string, number>>): string {
  return Object.entries(counts)
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([name, count]) => `${name} ${count}`)
    .join(', ');
}

/** JSON with bigints as decimal strings (hash keys) and dates as ISO strings. */
export function toJson(value: unknown): string {
  return JSON.stringify(
    value,
    (_key, field: unknown) => (typeof field === 'bigint' ? field.toString() : field),
    2,
  );
}

/** A lease as JSON output shows it. */
export function leaseJson(lease: Lease): Record<string, unknown> {
  return {
    leaseKey: lease.leaseKey,
    owner: lease.owner,
    leaseCounter: lease.leaseCounter,
    checkpoint: lease.checkpoint.sequenceNumber,
    checkpointSubSequenceNumber: lease.checkpoint.subSequenceNumber,
    pendingCheckpoint: lease.pendingCheckpoint?.sequenceNumber ?? null,
    pendingCheckpointSubSequenceNumber: lease.pendingCheckpoint?.subSequenceNumber ?? null,
    ownerSwitchesSinceCheckpoint: lease.ownerSwitchesSinceCheckpoint,
    parentShardIds: lease.parentShardIds,
    childShardIds: lease.childShardIds,
    hashKeyRange:
      lease.hashKeyRange === null
        ? null
        : {
            startingHashKey: lease.hashKeyRange.startingHashKey.toString(),
            endingHashKey: lease.hashKeyRange.endingHashKey.toString(),
          },
    streamIdentifier: lease.streamIdentifier,
    handoff:
      lease.handoff === null
        ? null
        : {
            from: lease.handoff.from,
            to: lease.handoff.to,
            deadline: lease.handoff.deadline?.toISOString() ?? null,
          },
  };
}
