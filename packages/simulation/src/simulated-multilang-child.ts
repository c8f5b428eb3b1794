import type { ChildProcessWithoutNullStreams } from 'node:child_process';
import { EventEmitter } from 'node:events';
import { createInterface } from 'node:readline';
import { PassThrough } from 'node:stream';
import type { RandomSource } from '@kcl/core';
import type { ChildLauncher } from '@kcl/multilang';
import type { FreezableClock } from './simulation-clock.js';

/** What a simulated multilang child does with the records it is sent. */
export interface SimulatedChildOptions {
  readonly clock: FreezableClock;
  readonly random: RandomSource;
  /** Called for every record the child handles (payload and sequence number). */
  readonly handle: (sequenceNumber: string) => void;
  /** Probability that a `processRecords` exchange dies (exit code 1) after handling part of the batch. */
  readonly crashProbability: number;
}

interface RecordLine {
  readonly sequenceNumber: string;
}

let nextPid = 100_000;

/**
 * A child process speaking the multilang protocol as the official samples do — handle each record,
 * checkpoint without arguments after each batch, at the shard's end and when asked to shut down,
 * retrying a checkpoint that failed for a passing reason — that
 * runs in this process on simulated time, and now and then dies in the middle of a batch.
 */
class SimulatedChildProcess extends EventEmitter {
  readonly stdin = new PassThrough();
  readonly stdout = new PassThrough();
  readonly stderr = new PassThrough();
  readonly pid = nextPid++;
  readonly #options: SimulatedChildOptions;
  readonly #lines: string[] = [];
  #wake: (() => void) | null = null;
  #exited = false;
  #inputEnded = false;

  constructor(options: SimulatedChildOptions) {
    super();
    this.#options = options;
    const input = createInterface({ input: this.stdin, crlfDelay: Number.POSITIVE_INFINITY });
    input.on('line', (line) => {
      this.#lines.push(line);
      this.#wake?.();
    });
    input.on('close', () => {
      this.#inputEnded = true;
      this.#wake?.();
    });
    queueMicrotask(() => {
      this.emit('spawn');
      void this.#run();
    });
  }

  kill(signal: NodeJS.Signals = 'SIGTERM'): boolean {
    this.#exit(null, signal);
    return true;
  }

  async #run(): Promise<void> {
    for (;;) {
      const line = await this.#next();
      if (line === null) {
        this.#exit(0, null);
        return;
      }
      const message = JSON.parse(line) as { action: string; records?: RecordLine[] };
      switch (message.action) {
        case 'processRecords': {
          const records = message.records ?? [];
          const crashAt =
            records.length > 0 && this.#options.random() < this.#options.crashProbability
              ? Math.floor(this.#options.random() * records.length)
              : -1;
          for (const [index, record] of records.entries()) {
            if (index === crashAt) {
              this.#exit(1, null);
              return;
            }
            this.#options.handle(record.sequenceNumber);
            await this.#options.clock.sleep(1 + Math.floor(this.#options.random() * 5));
          }
          if (!(await this.#checkpoint())) return;
          break;
        }
        case 'shardEnded':
        case 'shutdownRequested':
          if (!(await this.#checkpoint())) return;
          break;
        default:
          break;
      }
      this.#send({ action: 'status', responseFor: message.action });
    }
  }

  /**
   * Checkpoints "everything sent so far" and waits for the answer; like the official samples, tries
   * again (5 times, a second apart) when the answer is a throttling or dependency error. False once
   * the child is gone.
   */
  async #checkpoint(): Promise<boolean> {
    for (let attempt = 1; ; attempt++) {
      this.#send({ action: 'checkpoint', sequenceNumber: null });
      const reply = await this.#next();
      if (reply === null || this.#exited) return false;
      const { error } = JSON.parse(reply) as { error: string | null };
      const retryable = error === 'ThrottlingException' || error === 'KinesisClientLibDependencyException';
      if (!retryable || attempt >= 5) return true;
      await this.#options.clock.sleep(1_000);
    }
  }

  async #next(): Promise<string | null> {
    for (;;) {
      if (this.#exited) return null;
      const line = this.#lines.shift();
      if (line !== undefined) return line;
      if (this.#inputEnded) return null;
      await new Promise<void>((resolve) => {
        this.#wake = resolve;
      });
      this.#wake = null;
    }
  }

  #send(message: object): void {
    if (!this.#exited) this.stdout.write(`${JSON.stringify(message)}\n`);
  }

  #exit(code: number | null, signal: NodeJS.Signals | null): void {
    if (this.#exited) return;
    this.#exited = true;
    this.#wake?.();
    this.stdout.end();
    this.stderr.end();
    queueMicrotask(() => this.emit('exit', code, signal));
  }
}

/** A launcher for `createMultiLangProcessorFactory` whose children are simulated ones. */
export function simulatedChildLauncher(options: SimulatedChildOptions): ChildLauncher {
  return () => new SimulatedChildProcess(options) as unknown as ChildProcessWithoutNullStreams;
}
