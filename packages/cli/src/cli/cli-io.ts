import { createInterface } from 'node:readline/promises';

/** Where the CLI writes and reads; `process` in production, buffers in tests. */
export interface CliIo {
  readonly stdout: { write(text: string): unknown; readonly isTTY?: boolean };
  readonly stderr: { write(text: string): unknown; readonly isTTY?: boolean };
  readonly stdin: NodeJS.ReadableStream & { readonly isTTY?: boolean };
  readonly env: Readonly<Record<string, string | undefined>>;
}

/** JSON with bigints as decimal strings and dates as ISO strings; `line`: on one line (for streams of JSON). */
export function toJson(value: unknown, layout: 'indented' | 'line' = 'indented'): string {
  return JSON.stringify(
    value,
    (_key, field: unknown) => (typeof field === 'bigint' ? field.toString() : field),
    layout === 'line' ? undefined : 2,
  );
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

/** Asks a yes/no question on the terminal; anything but y/yes is no. */
export async function askYesNo(io: CliIo, question: string): Promise<boolean> {
  const prompt = createInterface({ input: io.stdin, output: io.stderr as NodeJS.WritableStream });
  try {
    const answer = await prompt.question(`${question} [y/N] `);
    return /^y(es)?$/i.test(answer.trim());
  } finally {
    prompt.close();
  }
}

/**
 * Progress of long work on stderr: a redrawn line on a terminal, a plain line every 10% otherwise (so
 * logs of CI jobs stay readable). Silent when disabled.
 */
export class Progress {
  readonly #io: CliIo;
  readonly #enabled: boolean;
  #lastStep = -1;
  #drawn = false;

  constructor(io: CliIo, enabled: boolean) {
    this.#io = io;
    this.#enabled = enabled;
  }

  update(label: string, done: number, total: number): void {
    if (!this.#enabled || total === 0) return;
    const percent = Math.floor((Math.min(done, total) / total) * 100);
    if (this.#io.stderr.isTTY === true) {
      this.#io.stderr.write(`\r\x1b[2K${label}: ${done}/${total} (${percent}%)`);
      this.#drawn = true;
      return;
    }
    const step = Math.floor(percent / 10);
    if (step === this.#lastStep) return;
    this.#lastStep = step;
    this.#io.stderr.write(`${label}: ${done}/${total} (${percent}%)\n`);
  }

  finish(): void {
    if (this.#drawn) this.#io.stderr.write('\n');
    this.#drawn = false;
    this.#lastStep = -1;
  }
}
