import { createInterface } from 'node:readline/promises';
import type { Lease } from '@kcl/core';
import type { RawOptions } from './cli-options.js';
import type { CliIo, ProgressReporter } from './cli-output.js';
import type { OpenedStore } from './store-connection.js';

/** What every command gets: the opened stores, the options, where to write. */
export interface CommandContext {
  readonly io: CliIo;
  readonly raw: RawOptions;
  readonly signal: AbortSignal;
  readonly json: boolean;
  readonly progress: ProgressReporter;
  readonly applicationName: string;
  readonly from: OpenedStore;
  /** Null only for commands that need the source alone (`--unmark`). */
  readonly to: OpenedStore | null;
  readonly stream: string | undefined;
}

/**
 * The leases of one stream. A lease names its stream (`account:stream:creationEpoch`) when the store
 * records it; otherwise it is read from the key: multi-stream lease keys are
 * `account:stream:creationEpoch:shardId` (the Java KCL's layout), and a plain shard id belongs to the
 * application's only stream, so it is selected.
 */
export function streamSelector(stream: string | undefined): ((lease: Lease) => boolean) | undefined {
  if (stream === undefined) return undefined;
  return (lease) => {
    if (lease.streamIdentifier !== null) {
      const parts = lease.streamIdentifier.split(':');
      return (parts.length >= 3 ? parts[parts.length - 2] : parts[0]) === stream;
    }
    const parts = lease.leaseKey.split(':');
    if (parts.length < 2) return true;
    return parts.length >= 4 ? parts[parts.length - 3] === stream : parts[0] === stream;
  };
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

/** Prints a line for people: on stdout normally, on stderr when stdout carries JSON. */
export function say(context: Pick<CommandContext, 'io' | 'json'>, text: string): void {
  (context.json ? context.io.stderr : context.io.stdout).write(`${text}\n`);
}

/** Prints a line on stderr. */
export function warn(context: Pick<CommandContext, 'io'>, text: string): void {
  context.io.stderr.write(`${text}\n`);
}
