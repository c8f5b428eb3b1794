/** One worker row of the view. */
export interface WorkerRow {
  readonly workerId: string;
  /** running, starting, stopping, stopped, killed, exited */
  readonly state: string;
  readonly leases: readonly string[];
  readonly recordsPerSecond: number | null;
  readonly processed: number;
  /** E.g. "kill -9 at 00:12". */
  readonly note: string;
}

/** One shard row of the view. */
export interface ShardRow {
  /** The short name of the shard's stream when the demo reads several; null with one. */
  readonly stream: string | null;
  readonly shard: string;
  /** Share of the hash key space, e.g. `0–25%`. */
  readonly keys: string;
  readonly owner: string | null;
  readonly state: string;
  readonly lagMs: number | null;
  readonly parents: readonly string[];
}

export type EventKind = 'script' | 'lease' | 'shard' | 'worker' | 'problem';

export interface ViewEvent {
  /** When it happened: time since the script started, or `startup`. */
  readonly time: string;
  readonly kind: EventKind;
  readonly text: string;
}

export interface ViewSnapshot {
  readonly header: readonly string[];
  readonly elapsedMs: number;
  readonly durationMs: number;
  /** What the demo is doing: producing, draining, stopping workers… */
  readonly phase: string;
  /** The next step of the script, e.g. "kill -9 a worker at 00:12". */
  readonly next: string | null;
  /** Records the producer has written so far. */
  readonly written: number;
  readonly writeRate: number;
  readonly processedDistinct: number;
  readonly processedTotal: number;
  readonly workers: readonly WorkerRow[];
  readonly shards: readonly ShardRow[];
  /** Latest last. */
  readonly events: readonly ViewEvent[];
}

export type LineStyle = 'title' | 'heading' | 'dim' | EventKind | null;

export interface StyledLine {
  readonly text: string;
  readonly style: LineStyle;
}

/** `75_500` → `01:15`; negative values (startup) keep their sign. */
export function formatClock(ms: number): string {
  const sign = ms < 0 ? '-' : '';
  const total = Math.floor(Math.abs(ms) / 1000);
  return `${sign}${String(Math.floor(total / 60)).padStart(2, '0')}:${String(total % 60).padStart(2, '0')}`;
}

/** `12_345` → `00:12.3`; `-1_200` → `-00:01.2`. */
export function formatEventTime(ms: number): string {
  const tenths = Math.floor(Math.abs(ms) / 100) % 10;
  return `${formatClock(ms)}.${tenths}`;
}

export function formatCount(value: number): string {
  return Math.round(value).toLocaleString('en-US');
}

/** `3, 'worker'` → `3 workers`; `1, 'shard'` → `1 shard`. */
export function formatQuantity(value: number, noun: string): string {
  return `${value} ${noun}${value === 1 ? '' : 's'}`;
}

/** `1_234` → `1.2 s`. */
export function formatSeconds(ms: number): string {
  return `${(ms / 1000).toFixed(1)} s`;
}

export function formatLag(ms: number | null): string {
  if (ms === null) return '-';
  return ms < 10_000 ? `${(ms / 1000).toFixed(1)} s` : `${Math.round(ms / 1000)} s`;
}

function table(rows: readonly (readonly string[])[], rightAligned: ReadonlySet<number>): string[] {
  const widths: number[] = [];
  for (const row of rows)
    row.forEach((cell, column) => {
      widths[column] = Math.max(widths[column] ?? 0, cell.length);
    });
  return rows.map((row) =>
    row
      .map((cell, column) =>
        column === row.length - 1 && !rightAligned.has(column)
          ? cell
          : rightAligned.has(column)
            ? cell.padStart(widths[column] ?? 0)
            : cell.padEnd(widths[column] ?? 0),
      )
      .join('  ')
      .trimEnd(),
  );
}

function progressBar(elapsedMs: number, durationMs: number, width: number): string {
  const filled = Math.max(0, Math.min(width, Math.round((elapsedMs / durationMs) * width)));
  return `${'#'.repeat(filled)}${'.'.repeat(width - filled)}`;
}

/**
 * The live view as lines, fitted to `height` lines of at most `width` characters: header, workers,
 * shards, then as many of the latest events as fit.
 */
export function renderFrame(snapshot: ViewSnapshot, size: { width: number; height: number }): StyledLine[] {
  const top: StyledLine[] = snapshot.header.map((text, index) => ({
    text,
    style: index === 0 ? 'title' : 'dim',
  }));
  top.push({
    text:
      `[${formatClock(snapshot.elapsedMs)} / ${formatClock(snapshot.durationMs)}] ` +
      `${progressBar(snapshot.elapsedMs, snapshot.durationMs, 20)}  ${snapshot.phase}` +
      (snapshot.next === null ? '' : `  (next: ${snapshot.next})`),
    style: null,
  });
  top.push({
    text:
      `written ${formatCount(snapshot.written)} (${formatCount(snapshot.writeRate)}/s)   ` +
      `processed ${formatCount(snapshot.processedDistinct)} distinct, ${formatCount(snapshot.processedTotal)} in all`,
    style: null,
  });
  top.push({ text: '', style: null });

  const workerTable = table(
    [
      ['WORKER', 'STATE', 'LEASES', 'REC/S', 'PROCESSED', 'SHARDS'],
      ...snapshot.workers.map((worker) => [
        worker.workerId,
        worker.state,
        worker.state === 'running' || worker.state === 'stopping' ? String(worker.leases.length) : '-',
        worker.recordsPerSecond === null ? '-' : formatCount(worker.recordsPerSecond),
        formatCount(worker.processed),
        worker.note !== '' ? worker.note : worker.leases.join(' '),
      ]),
    ],
    new Set([2, 3, 4]),
  );
  top.push(...workerTable.map((text, index) => ({ text, style: index === 0 ? ('heading' as const) : null })));
  top.push({ text: '', style: null });

  // With several streams each shard row starts with its stream's short name.
  const withStream = snapshot.shards.some((shard) => shard.stream !== null);
  const shardTable = table(
    [
      [...(withStream ? ['STREAM'] : []), 'SHARD', 'KEYS', 'OWNER', 'LAG', 'STATE', 'PARENTS'],
      ...snapshot.shards.map((shard) => [
        ...(withStream ? [shard.stream ?? '-'] : []),
        shard.shard,
        shard.keys,
        shard.owner ?? '-',
        formatLag(shard.lagMs),
        shard.state,
        shard.parents.join(' '),
      ]),
    ],
    new Set([withStream ? 4 : 3]),
  );
  const shardLines = shardTable.map((text, index) => ({
    text,
    style: index === 0 ? ('heading' as const) : null,
  }));

  const lines = [...top];
  const eventsRoom = size.height - lines.length - shardLines.length - 2;
  const shownShards =
    eventsRoom >= 3 ? shardLines : shardLines.slice(0, Math.max(1, size.height - lines.length - 5));
  lines.push(...shownShards);
  if (shownShards.length < shardLines.length)
    lines.push({ text: `… ${shardLines.length - shownShards.length} more shards`, style: 'dim' });
  lines.push({ text: '', style: null });
  lines.push({ text: 'EVENTS', style: 'heading' });
  const room = Math.max(0, size.height - lines.length);
  const events = room === 0 ? [] : snapshot.events.slice(-room);
  lines.push(
    ...events.map((event) => ({ text: `${event.time.padStart(8)}  ${event.text}`, style: event.kind })),
  );
  return lines.slice(0, size.height).map((line) => ({ ...line, text: fit(line.text, size.width) }));
}

function fit(text: string, width: number): string {
  return text.length <= width ? text : `${text.slice(0, Math.max(0, width - 1))}…`;
}

/** The plain (no TTY) form of a snapshot: two summary lines. */
export function renderSummaryLines(snapshot: ViewSnapshot): string[] {
  const workers = snapshot.workers
    .map((worker) =>
      worker.state === 'running'
        ? `${worker.workerId} ${worker.leases.length} leases ${formatCount(worker.recordsPerSecond ?? 0)}/s`
        : `${worker.workerId} ${worker.state}`,
    )
    .join(' | ');
  const shards = snapshot.shards
    .map(
      (shard) =>
        `${shard.stream === null ? '' : `${shard.stream}/`}${shard.shard} ${shard.owner ?? '-'} ${shard.state}${shard.lagMs === null ? '' : ` lag ${formatLag(shard.lagMs)}`}`,
    )
    .join(' | ');
  return [
    `${snapshot.phase}: written ${snapshot.written}, processed ${snapshot.processedDistinct} distinct ` +
      `(${snapshot.processedTotal} in all) | ${workers}`,
    `shards: ${shards}`,
  ];
}

const ANSI: Readonly<Record<Exclude<LineStyle, null>, string>> = {
  title: '\x1b[1m',
  heading: '\x1b[1m',
  dim: '\x1b[2m',
  script: '\x1b[1;33m',
  lease: '',
  shard: '\x1b[36m',
  worker: '\x1b[35m',
  problem: '\x1b[1;31m',
};

export interface TerminalViewOptions {
  readonly out: NodeJS.WritableStream & { columns?: number; rows?: number };
  /** Redraw in place (true) or print plain timestamped lines (false). */
  readonly tty: boolean;
  readonly color: boolean;
  /** The time label of a line printed now, e.g. `00:12.3`. */
  readonly now: () => string;
}

/**
 * Writes the demo's output: in a terminal, a frame redrawn in place about once a second; otherwise
 * plain timestamped lines — each event as it happens and a summary every few seconds.
 */
export class TerminalView {
  readonly #options: TerminalViewOptions;
  #drawnLines = 0;
  #live = false;

  constructor(options: TerminalViewOptions) {
    this.#options = options;
  }

  get tty(): boolean {
    return this.#options.tty;
  }

  /** A line outside the live frame (setup, results). */
  print(text: string, style: LineStyle = null): void {
    this.#clearFrame();
    this.#options.out.write(`${this.#paint(text, style)}\n`);
  }

  /** A timestamped line in plain mode; in a terminal, events show up in the next frame instead. */
  event(event: ViewEvent): void {
    if (this.#options.tty && this.#live) return;
    this.print(`[${event.time}] ${event.text}`, event.kind);
  }

  /** Plain mode: progress or a summary, timestamped. In a terminal (while live) it shows in the frame. */
  note(text: string): void {
    if (this.#options.tty && this.#live) return;
    this.print(`[${this.#options.now()}] ${text}`, 'dim');
  }

  /** Draws a frame (terminal) or the summary lines (plain). */
  draw(snapshot: ViewSnapshot): void {
    if (!this.#options.tty) {
      for (const line of renderSummaryLines(snapshot)) this.note(line);
      return;
    }
    this.#live = true;
    const width = Math.max(40, (this.#options.out.columns ?? 100) - 1);
    const height = Math.max(12, (this.#options.out.rows ?? 40) - 1);
    const frame = renderFrame(snapshot, { width, height });
    let output = this.#drawnLines > 0 ? `\x1b[${this.#drawnLines}A\r` : '';
    for (const line of frame) output += `\x1b[2K${this.#paint(line.text, line.style)}\n`;
    output += '\x1b[J';
    if (this.#drawnLines === 0) output = `\x1b[?25l${output}`;
    this.#options.out.write(output);
    this.#drawnLines = frame.length;
  }

  /** Leaves the last frame on screen and returns to plain output below it. */
  release(): void {
    if (this.#options.tty && this.#live) this.#options.out.write('\x1b[?25h');
    this.#live = false;
    this.#drawnLines = 0;
  }

  #clearFrame(): void {
    // Lines printed while a frame is on screen go below it; the next frame starts after them.
    this.#drawnLines = 0;
  }

  #paint(text: string, style: LineStyle): string {
    if (!this.#options.color || style === null || ANSI[style] === '') return text;
    return `${ANSI[style]}${text}\x1b[0m`;
  }
}
