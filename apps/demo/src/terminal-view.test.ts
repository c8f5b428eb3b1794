import { describe, expect, it } from 'vitest';
import {
  formatClock,
  formatEventTime,
  formatLag,
  renderFrame,
  renderSummaryLines,
  TerminalView,
  type ViewSnapshot,
} from './terminal-view.js';

const SNAPSHOT: ViewSnapshot = {
  header: ['kcl demo — 3 workers on 4 shards', 'timings: lease renew 1 s, expiry 3 s'],
  elapsedMs: 12_300,
  durationMs: 60_000,
  phase: 'producing',
  next: 'a new worker joins at 00:18',
  written: 2_460,
  writeRate: 201,
  processedDistinct: 2_400,
  processedTotal: 2_431,
  workers: [
    {
      workerId: 'w1',
      state: 'running',
      leases: ['shard-0', 'shard-2'],
      recordsPerSecond: 98.4,
      processed: 1_200,
      note: '',
    },
    {
      workerId: 'w2',
      state: 'killed',
      leases: [],
      recordsPerSecond: null,
      processed: 700,
      note: 'kill -9 at 00:12',
    },
  ],
  shards: [
    {
      stream: null,
      shard: 'shard-0',
      keys: '0–25%',
      owner: 'w1',
      state: 'processing',
      lagMs: 180,
      parents: [],
    },
    {
      stream: null,
      shard: 'shard-1',
      keys: '25–50%',
      owner: null,
      state: 'no owner',
      lagMs: null,
      parents: [],
    },
  ],
  events: Array.from({ length: 30 }, (_, index) => ({
    time: formatEventTime(index * 1_000),
    kind: 'lease' as const,
    text: `event number ${index}`,
  })),
};

describe('renderFrame', () => {
  it('shows the progress, every worker and shard, and the latest events that fit', () => {
    const text = renderFrame(SNAPSHOT, { width: 100, height: 30 }).map((line) => line.text);
    expect(text).toHaveLength(30);
    expect(text[2]).toBe(
      '[00:12 / 01:00] ####................  producing  (next: a new worker joins at 00:18)',
    );
    expect(text[3]).toBe('written 2,460 (201/s)   processed 2,400 distinct, 2,431 in all');
    expect(text).toContain('w1      running       2     98      1,200  shard-0 shard-2');
    expect(text).toContain('w2      killed        -      -        700  kill -9 at 00:12');
    expect(text).toContain('shard-0  0–25%   w1     0.2 s  processing');
    expect(text).toContain('shard-1  25–50%  -          -  no owner');
    expect(text.at(-1)).toBe(' 00:29.0  event number 29');
    expect(text).not.toContain(' 00:00.0  event number 0');
  });

  it('never draws a line wider than the terminal or more lines than it has', () => {
    const frame = renderFrame(SNAPSHOT, { width: 40, height: 14 });
    expect(frame.length).toBeLessThanOrEqual(14);
    expect(Math.max(...frame.map((line) => line.text.length))).toBeLessThanOrEqual(40);
    expect(frame[0]?.text.endsWith('…')).toBe(false);
    expect(frame[2]?.text.endsWith('…')).toBe(true);
  });
});

describe('several streams', () => {
  const MULTI: ViewSnapshot = {
    ...SNAPSHOT,
    workers: [{ ...SNAPSHOT.workers[0]!, leases: ['demo-1/shard-0', 'demo-2/shard-0'] }],
    shards: [
      {
        stream: 'demo-1',
        shard: 'shard-0',
        keys: '0–100%',
        owner: 'w1',
        state: 'processing',
        lagMs: 0,
        parents: [],
      },
      {
        stream: 'demo-2',
        shard: 'shard-0',
        keys: '0–100%',
        owner: 'w1',
        state: 'processing',
        lagMs: null,
        parents: [],
      },
    ],
  };

  it('shows the stream of each shard in a column of its own, and beside each lease', () => {
    const text = renderFrame(MULTI, { width: 100, height: 30 }).map((line) => line.text);
    expect(text).toContain('w1      running       2     98      1,200  demo-1/shard-0 demo-2/shard-0');
    expect(text).toContain('STREAM  SHARD    KEYS    OWNER    LAG  STATE       PARENTS');
    expect(text).toContain('demo-1  shard-0  0–100%  w1     0.0 s  processing');
    expect(text).toContain('demo-2  shard-0  0–100%  w1         -  processing');
    // One stream: no stream column.
    expect(renderFrame(SNAPSHOT, { width: 100, height: 30 }).map((line) => line.text)).toContain(
      'SHARD    KEYS    OWNER    LAG  STATE       PARENTS',
    );
  });

  it('names the stream of each shard in the plain summary', () => {
    expect(renderSummaryLines(MULTI)[1]).toBe(
      'shards: demo-1/shard-0 w1 processing lag 0.0 s | demo-2/shard-0 w1 processing',
    );
  });
});

describe('plain output', () => {
  it('sums a snapshot up in two lines', () => {
    expect(renderSummaryLines(SNAPSHOT)).toEqual([
      'producing: written 2460, processed 2400 distinct (2431 in all) | w1 2 leases 98/s | w2 killed',
      'shards: shard-0 w1 processing lag 0.2 s | shard-1 - no owner',
    ]);
  });

  it('prints events with their time, without cursor movement', () => {
    let written = '';
    const view = new TerminalView({
      out: {
        write: (chunk: string) => {
          written += chunk;
          return true;
        },
      } as unknown as NodeJS.WriteStream,
      tty: false,
      color: false,
      now: () => '00:01.0',
    });
    view.event({ time: '00:00.5', kind: 'script', text: 'kill -9 w2' });
    view.draw(SNAPSHOT);
    expect(written.split('\n')).toEqual([
      '[00:00.5] kill -9 w2',
      '[00:01.0] producing: written 2460, processed 2400 distinct (2431 in all) | w1 2 leases 98/s | w2 killed',
      '[00:01.0] shards: shard-0 w1 processing lag 0.2 s | shard-1 - no owner',
      '',
    ]);
    expect(written).not.toContain('\x1b');
  });

  it('redraws in place in a terminal', () => {
    const chunks: string[] = [];
    const view = new TerminalView({
      out: {
        write: (chunk: string) => chunks.push(chunk) > 0,
        columns: 80,
        rows: 24,
      } as unknown as NodeJS.WriteStream,
      tty: true,
      color: false,
      now: () => '00:01.0',
    });
    view.draw(SNAPSHOT);
    view.draw(SNAPSHOT);
    const lines = chunks[0]?.split('\n').length ?? 0;
    expect(chunks[1]?.startsWith(`\x1b[${lines - 1}A\r`)).toBe(true);
    view.release();
    expect(chunks.at(-1)).toBe('\x1b[?25h');
  });
});

describe('formats', () => {
  it('formats clocks, event times and lags', () => {
    expect(formatClock(75_500)).toBe('01:15');
    expect(formatClock(-1_200)).toBe('-00:01');
    expect(formatEventTime(12_345)).toBe('00:12.3');
    expect(formatLag(null)).toBe('-');
    expect(formatLag(1_234)).toBe('1.2 s');
    expect(formatLag(65_000)).toBe('65 s');
  });
});
