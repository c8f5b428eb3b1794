import { existsSync, readFileSync } from 'node:fs';

/** One line the test children append to their output file. */
export interface ChildEvent {
  readonly event: string;
  readonly pid: number;
  readonly shardId?: string;
  readonly data?: string;
  readonly sequenceNumber?: string | null;
  readonly subSequenceNumber?: number | null;
  readonly partitionKey?: string;
  readonly error?: string | null;
  readonly [key: string]: unknown;
}

export function readChildEvents(path: string): ChildEvent[] {
  if (!existsSync(path)) return [];
  return readFileSync(path, 'utf8')
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => JSON.parse(line) as ChildEvent);
}

/** The distinct record payloads the children saw. */
export function recordData(events: readonly ChildEvent[]): Set<string> {
  return new Set(events.filter((event) => event.event === 'record').map((event) => event.data as string));
}
