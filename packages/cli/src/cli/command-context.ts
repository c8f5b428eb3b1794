import type { KinesisClient } from '@aws-sdk/client-kinesis';
import type { LeaseStore } from '@kcl/core';
import type { CliIo, Progress } from './cli-io.js';
import type { RawOptions } from './store-options.js';

/** What every command gets: the opened store, the options, where to write. */
export interface CommandContext {
  readonly io: CliIo;
  readonly raw: RawOptions;
  readonly signal: AbortSignal;
  readonly json: boolean;
  readonly progress: Progress;
  readonly applicationName: string;
  readonly store: LeaseStore;
  /** The reader's wall clock. */
  readonly now: () => number;
  /** A Kinesis client when `--kinesis-region` or `--kinesis-endpoint` was given (stream checks). */
  readonly kinesis: KinesisClient | undefined;
}

/** Prints a line for people: on stdout normally, on stderr when stdout carries JSON. */
export function say(context: Pick<CommandContext, 'io' | 'json'>, text: string): void {
  (context.json ? context.io.stderr : context.io.stdout).write(`${text}\n`);
}
