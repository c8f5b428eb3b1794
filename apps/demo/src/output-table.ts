import Database from 'better-sqlite3';
import type { ProcessedLine } from './worker-protocol.js';

/** The table the workers of `--exactly-once` insert their records into, in the SQLite lease store's file. */
export const DEMO_OUTPUT_TABLE = 'demo_output';

/** A row of the output table as the workers insert it (the id, assigned by SQLite, gives commit order). */
export interface OutputRow {
  readonly worker_id: string;
  readonly lease_key: string;
  /** The stream's name when the demo reads several, else null. */
  readonly stream_name: string | null;
  readonly sequence_number: string;
  readonly sub_sequence_number: number;
  readonly partition_key: string;
  readonly data: string;
  /** When the batch was handled: epoch milliseconds, as `ProcessedLine.t`. */
  readonly processed_at: number;
}

/** Creates the output table in the SQLite file (before the workers start). */
export function createOutputTable(file: string): void {
  const database = new Database(file, { timeout: 5_000 });
  try {
    database.exec(`create table if not exists ${DEMO_OUTPUT_TABLE} (
      id integer primary key autoincrement,
      worker_id text not null, lease_key text not null, stream_name text,
      sequence_number text not null, sub_sequence_number integer not null,
      partition_key text not null, data text not null, processed_at real not null)`);
  } finally {
    database.close();
  }
}

/** Every committed row as the verification reads processed records, in commit order. */
export function readOutputTable(file: string): ProcessedLine[] {
  const database = new Database(file, { readonly: true, timeout: 5_000 });
  try {
    const rows = database.prepare<[], OutputRow>(`select * from ${DEMO_OUTPUT_TABLE} order by id`).all();
    return rows.map((row) => ({
      w: row.worker_id,
      s: row.lease_key,
      ...(row.stream_name === null ? {} : { n: row.stream_name }),
      q: row.sequence_number,
      k: row.partition_key,
      d: row.data,
      t: row.processed_at,
    }));
  } finally {
    database.close();
  }
}

/** How many distinct records the output table holds (the drain's progress with --exactly-once). */
export function countCommittedRecords(file: string): number {
  const database = new Database(file, { readonly: true, timeout: 5_000 });
  try {
    const row = database
      .prepare<[], { count: number }>(`select count(distinct data) as count from ${DEMO_OUTPUT_TABLE}`)
      .get();
    return row?.count ?? 0;
  } finally {
    database.close();
  }
}
