/**
 * What a worker publishes about each lease it holds, in its worker registry entry: a bounded JSON
 * string under the metadata key `LEASE_FIGURES_METADATA_KEY`, so every store carries it without a
 * schema of its own. Written with every heartbeat (every lease renew interval); tools read it back with
 * `decodeLeaseFigures`.
 */
export interface LeaseFigures {
  readonly leaseKey: string;
  /** Records processed per second since the previous heartbeat. */
  readonly recordsPerSecond: number;
  /** Bytes of record data processed per second since the previous heartbeat. */
  readonly bytesPerSecond: number;
  /** How far the last batch read was behind the shard's newest record; null before the first batch. */
  readonly millisBehindLatest: number | null;
  /** When the worker last wrote a checkpoint of the lease (its wall clock); null: not since it took it. */
  readonly lastCheckpointAt: Date | null;
}

/** The worker metadata key of the per-lease figures. */
export const LEASE_FIGURES_METADATA_KEY = 'leaseFigures';

/**
 * The worker metadata key of the worker's lease renew interval (milliseconds, decimal): it heartbeats
 * that often, so tools can judge from its heartbeat age whether it is live.
 */
export const LEASE_RENEW_INTERVAL_METADATA_KEY = 'leaseRenewIntervalMs';

/** The longest figures string a worker writes: leases past it are left out (and counted). */
export const LEASE_FIGURES_MAX_LENGTH = 16_000;

/** A worker's published figures: the leases that fit, and how many did not. */
export interface PublishedLeaseFigures {
  readonly leases: readonly LeaseFigures[];
  /** Held leases left out to keep the entry bounded. */
  readonly omitted: number;
}

type EncodedFigures = [string, number, number, number | null, number | null];

/**
 * The metadata value for `figures`: compact JSON (`{"v":1,"l":[[leaseKey, records/s, bytes/s,
 * millisBehindLatest, lastCheckpointAtMs], …],"o":omitted}`) at most `maxLength` characters long; the
 * leases that do not fit are counted as omitted.
 */
export function encodeLeaseFigures(
  figures: readonly LeaseFigures[],
  maxLength = LEASE_FIGURES_MAX_LENGTH,
): string {
  const rows: string[] = [];
  // Room for the envelope and the omitted count.
  let length = 32;
  for (const figure of figures) {
    const encoded: EncodedFigures = [
      figure.leaseKey,
      round(figure.recordsPerSecond),
      round(figure.bytesPerSecond),
      figure.millisBehindLatest,
      figure.lastCheckpointAt?.getTime() ?? null,
    ];
    const row = JSON.stringify(encoded);
    if (length + row.length + 1 > maxLength) break;
    rows.push(row);
    length += row.length + 1;
  }
  return `{"v":1,"l":[${rows.join(',')}],"o":${figures.length - rows.length}}`;
}

/** Reads what `encodeLeaseFigures` wrote; null when the value is absent or not in that form. */
export function decodeLeaseFigures(value: string | undefined): PublishedLeaseFigures | null {
  if (value === undefined) return null;
  let parsed: unknown;
  try {
    parsed = JSON.parse(value);
  } catch {
    return null;
  }
  if (parsed === null || typeof parsed !== 'object') return null;
  const { v, l, o } = parsed as { v?: unknown; l?: unknown; o?: unknown };
  if (v !== 1 || !Array.isArray(l)) return null;
  const leases: LeaseFigures[] = [];
  for (const row of l) {
    if (!Array.isArray(row) || typeof row[0] !== 'string') continue;
    const [leaseKey, records, bytes, behind, checkpointAt] = row as unknown[];
    leases.push({
      leaseKey: leaseKey as string,
      recordsPerSecond: typeof records === 'number' ? records : 0,
      bytesPerSecond: typeof bytes === 'number' ? bytes : 0,
      millisBehindLatest: typeof behind === 'number' ? behind : null,
      lastCheckpointAt: typeof checkpointAt === 'number' ? new Date(checkpointAt) : null,
    });
  }
  return { leases, omitted: typeof o === 'number' ? o : 0 };
}

function round(value: number): number {
  return Math.round(value * 10) / 10;
}
