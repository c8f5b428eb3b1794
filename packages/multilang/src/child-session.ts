import type { ChildProcessWithoutNullStreams } from 'node:child_process';
import { createInterface } from 'node:readline';
import type { Checkpointer } from '@kcl/consumer';
import type { Clock, Logger } from '@kcl/core';
import { KclError } from '@kcl/core';
import type { ChildLauncher, ChildSignaller } from './child-process-launcher.js';
import { launchChildProcess, signalChildProcess } from './child-process-launcher.js';
import type { ExecutableCommand } from './executable-command.js';
import { MultiLangChildError } from './multilang-errors.js';
import type {
  ActionMessage,
  CheckpointErrorName,
  ChildLine,
  DaemonMessage,
  MultiLangAction,
} from './multilang-protocol.js';
import { checkpointErrorName, decodeChildLine, encodeDaemonMessage } from './multilang-protocol.js';

export interface ChildSessionOptions {
  readonly shardId: string;
  readonly command: ExecutableCommand;
  readonly workingDirectory: string;
  readonly environment: Readonly<Record<string, string | undefined>>;
  /** Already carries the shard id. */
  readonly logger: Logger;
  readonly clock: Clock;
  /** The longest wait for one message from the child (`timeoutInSeconds`), or null. */
  readonly messageTimeoutMs: number | null;
  /** After stdin is closed, how long the child may take to exit before SIGTERM. */
  readonly exitTimeoutMs: number;
  /** After SIGTERM, how long before SIGKILL. */
  readonly killTimeoutMs: number;
  readonly launcher?: ChildLauncher;
  /** How SIGTERM and SIGKILL are sent (default: to the child itself). */
  readonly signal?: ChildSignaller;
}

export interface ChildExit {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
}

type ProtocolLine = Exclude<ChildLine, { kind: 'skip' }>;

const MAX_LOGGED_LINE = 8 * 1024;

/**
 * One child process speaking the multilang protocol: lock-step exchanges (one action, any number of
 * checkpoint requests answered at once, then the status), stderr drained and logged continuously,
 * stray stdout lines skipped, and a bounded shutdown (close stdin → wait → SIGTERM → wait → SIGKILL).
 */
export class ChildSession {
  readonly shardId: string;
  readonly #options: ChildSessionOptions;
  readonly #child: ChildProcessWithoutNullStreams;
  readonly #exited: Promise<ChildExit>;
  #exit: ChildExit | null = null;
  readonly #queue: ProtocolLine[] = [];
  #waiter: { resolve: (line: ProtocolLine) => void; reject: (error: unknown) => void } | null = null;
  #stdoutEnded = false;
  #writeError: unknown = null;
  #busy = false;
  #closing: Promise<ChildExit> | null = null;
  #terminating: Promise<ChildExit> | null = null;

  private constructor(options: ChildSessionOptions, child: ChildProcessWithoutNullStreams) {
    this.#options = options;
    this.shardId = options.shardId;
    this.#child = child;
    this.#exited = new Promise<ChildExit>((resolve) => {
      child.once('exit', (code, signal) => {
        this.#exit = { code, signal };
        options.logger.debug('child exited', { pid: child.pid, code, signal });
        resolve(this.#exit);
      });
    });

    const stdout = createInterface({ input: child.stdout, crlfDelay: Number.POSITIVE_INFINITY });
    stdout.on('line', (line) => this.#onStdoutLine(line));
    stdout.on('close', () => {
      this.#stdoutEnded = true;
      this.#failWaiter(
        () => new MultiLangChildError(this.shardId, 'exited', `closed its stdout${this.#describeExit()}`),
      );
    });

    const stderr = createInterface({ input: child.stderr, crlfDelay: Number.POSITIVE_INFINITY });
    stderr.on('line', (line) => options.logger.info(`child: ${truncate(line)}`, { pid: child.pid }));

    child.stdin.on('error', (error) => {
      this.#writeError ??= error;
      this.#failWaiter(
        () =>
          new MultiLangChildError(this.shardId, 'write-failed', `could not be written to: ${String(error)}`, {
            cause: error,
          }),
      );
    });
    child.stdout.on('error', () => undefined);
    child.stderr.on('error', () => undefined);
  }

  /** Starts the child; rejects with a `start-failed` error when it cannot be started. */
  static start(options: ChildSessionOptions): Promise<ChildSession> {
    const launcher = options.launcher ?? launchChildProcess;
    return new Promise<ChildSession>((resolve, reject) => {
      let child: ChildProcessWithoutNullStreams;
      try {
        child = launcher(options.command, {
          workingDirectory: options.workingDirectory,
          environment: options.environment,
        });
      } catch (error) {
        reject(startFailure(options, error));
        return;
      }
      const onError = (error: Error): void => {
        child.stdin.on('error', () => undefined);
        reject(startFailure(options, error));
      };
      child.once('error', onError);
      child.once('spawn', () => {
        child.off('error', onError);
        child.on('error', (error) => options.logger.warn('child process error', { pid: child.pid, error }));
        options.logger.info('child started', { pid: child.pid, command: options.command.text });
        resolve(new ChildSession(options, child));
      });
    });
  }

  get pid(): number | undefined {
    return this.#child.pid;
  }

  /** Still running and able to talk: not exited, stdout open, stdin writable, not being shut down. */
  get alive(): boolean {
    return (
      this.#exit === null &&
      !this.#stdoutEnded &&
      this.#writeError === null &&
      this.#closing === null &&
      this.#terminating === null
    );
  }

  /** An exchange is in progress. */
  get busy(): boolean {
    return this.#busy;
  }

  /** Resolves when the child has exited. */
  exited(): Promise<ChildExit> {
    return this.#exited;
  }

  /**
   * Sends one action and waits for its status, answering checkpoint requests on the way with
   * `checkpointer` (or `InvalidStateException` when the action has none). Throws a
   * `MultiLangChildError` when the child dies, times out, or answers with another action's status.
   */
  async exchange(message: ActionMessage, checkpointer: Checkpointer | null): Promise<void> {
    if (this.#busy)
      throw new KclError(
        'MULTILANG_EXCHANGE_IN_PROGRESS',
        `@kcl/multilang: shard ${this.shardId}: an exchange is already in progress; wait for its answer before sending the next action`,
      );
    this.#busy = true;
    const action = message.action;
    try {
      this.#write(message);
      for (;;) {
        const line = await this.#next(action);
        if (line.kind === 'checkpoint') {
          await this.#answerCheckpoint(line, checkpointer);
          continue;
        }
        if (line.responseFor === action) return;
        throw new MultiLangChildError(
          this.shardId,
          'wrong-status',
          `answered ${action} with a status for ${JSON.stringify(line.responseFor)}; the child and the daemon disagree on the protocol state`,
        );
      }
    } finally {
      this.#busy = false;
    }
  }

  /**
   * The end of a conversation: closes stdin (the child should exit on EOF), waits `exitTimeoutMs`,
   * then terminates. Idempotent.
   */
  close(): Promise<ChildExit> {
    this.#closing ??= (async () => {
      this.#child.stdin.end();
      if (this.#exit !== null) return this.#exit;
      const timer = new AbortController();
      const outcome = await Promise.race([
        this.#exited,
        this.#options.clock.sleep(this.#options.exitTimeoutMs, timer.signal).then(() => null),
      ]);
      timer.abort();
      if (outcome !== null) return outcome;
      this.#options.logger.warn('child did not exit after its stdin was closed; terminating it', {
        pid: this.pid,
        exitTimeoutMs: this.#options.exitTimeoutMs,
      });
      return this.terminate();
    })();
    return this.#closing;
  }

  /** Ends the child now: SIGTERM to its process group, SIGKILL after `killTimeoutMs`. Idempotent. */
  terminate(): Promise<ChildExit> {
    this.#terminating ??= (async () => {
      if (this.#exit !== null) return this.#exit;
      const signal = this.#options.signal ?? signalChildProcess;
      this.#child.stdin.destroy();
      signal(this.#child, 'SIGTERM');
      const timer = new AbortController();
      const outcome = await Promise.race([
        this.#exited,
        this.#options.clock.sleep(this.#options.killTimeoutMs, timer.signal).then(() => null),
      ]);
      timer.abort();
      if (outcome !== null) return outcome;
      this.#options.logger.warn('child ignored SIGTERM; killing it', { pid: this.pid });
      signal(this.#child, 'SIGKILL');
      return this.#exited;
    })();
    return this.#terminating;
  }

  #write(message: DaemonMessage): void {
    if (this.#writeError !== null || this.#child.stdin.destroyed || this.#child.stdin.writableEnded) {
      throw new MultiLangChildError(
        this.shardId,
        'write-failed',
        `could not be sent ${message.action}: its stdin is closed${this.#describeExit()}`,
        { cause: this.#writeError ?? undefined },
      );
    }
    this.#child.stdin.write(`${encodeDaemonMessage(message)}\n`);
  }

  #next(action: MultiLangAction): Promise<ProtocolLine> {
    const queued = this.#queue.shift();
    if (queued !== undefined) return Promise.resolve(queued);
    if (this.#writeError !== null) {
      return Promise.reject(
        new MultiLangChildError(
          this.shardId,
          'write-failed',
          `could not be written to: ${String(this.#writeError)}`,
        ),
      );
    }
    if (this.#stdoutEnded) {
      return Promise.reject(
        new MultiLangChildError(
          this.shardId,
          'exited',
          `closed its stdout while ${action} awaited a status${this.#describeExit()}`,
        ),
      );
    }
    return new Promise<ProtocolLine>((resolve, reject) => {
      const timeoutMs = this.#options.messageTimeoutMs;
      const timer = new AbortController();
      const settle = (): void => {
        this.#waiter = null;
        timer.abort();
      };
      this.#waiter = {
        resolve: (line) => {
          settle();
          resolve(line);
        },
        reject: (error) => {
          settle();
          reject(error);
        },
      };
      if (timeoutMs !== null) {
        void this.#options.clock.sleep(timeoutMs, timer.signal).then(() => {
          if (timer.signal.aborted) return;
          this.#waiter?.reject(
            new MultiLangChildError(
              this.shardId,
              'timeout',
              `sent no message for ${timeoutMs} ms while ${action} awaited a status (timeoutInSeconds)`,
            ),
          );
        });
      }
    });
  }

  #onStdoutLine(line: string): void {
    const decoded = decodeChildLine(line);
    if (decoded.kind === 'skip') {
      if (decoded.reason !== 'blank line') {
        this.#options.logger.info('skipping unexpected line on the child stdout', {
          reason: decoded.reason,
          line: truncate(line),
        });
      }
      return;
    }
    if (this.#waiter !== null) this.#waiter.resolve(decoded);
    else this.#queue.push(decoded);
  }

  #failWaiter(error: () => MultiLangChildError): void {
    this.#waiter?.reject(error());
  }

  async #answerCheckpoint(
    line: Extract<ProtocolLine, { kind: 'checkpoint' }>,
    checkpointer: Checkpointer | null,
  ): Promise<void> {
    const { logger } = this.#options;
    const request = line.request;
    let error: CheckpointErrorName | null = null;
    if (!request.valid) {
      error = 'IllegalArgumentException';
      logger.warn('invalid checkpoint request from the child', { problem: request.problem });
    } else if (checkpointer === null) {
      error = 'InvalidStateException';
      logger.error(
        `was asked to checkpoint at ${request.sequenceNumber ?? 'the latest record'} but no checkpointer was provided for shard ${this.shardId}`,
      );
    } else {
      try {
        if (request.sequenceNumber === null) await checkpointer.checkpoint();
        else if (request.subSequenceNumber === null) await checkpointer.checkpoint(request.sequenceNumber);
        else await checkpointer.checkpoint(request.sequenceNumber, request.subSequenceNumber);
      } catch (thrown) {
        error = checkpointErrorName(thrown);
        logger.warn('checkpoint failed', {
          sequenceNumber: request.sequenceNumber,
          subSequenceNumber: request.subSequenceNumber,
          error: thrown,
          reply: error,
        });
      }
    }
    this.#write({
      action: 'checkpoint',
      sequenceNumber: line.rawSequenceNumber,
      subSequenceNumber: line.rawSubSequenceNumber,
      error,
    });
  }

  #describeExit(): string {
    const exit = this.#exit;
    if (exit === null) return '';
    return exit.signal === null ? ` (exit code ${exit.code})` : ` (killed by ${exit.signal})`;
  }
}

function startFailure(options: ChildSessionOptions, error: unknown): MultiLangChildError {
  const detail = error instanceof Error ? error.message : String(error);
  return new MultiLangChildError(
    options.shardId,
    'start-failed',
    `could not be started (${JSON.stringify(options.command.text)}): ${detail}`,
    { cause: error },
  );
}

function truncate(line: string): string {
  return line.length > MAX_LOGGED_LINE
    ? `${line.slice(0, MAX_LOGGED_LINE)}… (${line.length} characters)`
    : line;
}
