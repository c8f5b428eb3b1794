import type { Clock, Logger } from '@kcl/core';
import type { ChildLauncher, ChildSignaller } from './child-process-launcher.js';
import type { ChildSession } from './child-session.js';
import type { ExecutableCommand } from './executable-command.js';
import type { MultiLangChildError, MultiLangShardGivenUpError } from './multilang-errors.js';
import type { ReplayMemoryBudget } from './replay-buffer.js';

/** What `createMultiLangProcessorFactory` needs: the child to run, its limits, and whom to tell about failures. */
export interface MultiLangProcessorOptions {
  readonly command: ExecutableCommand;
  readonly workingDirectory: string;
  /** The children's environment. */
  readonly environment: Readonly<Record<string, string | undefined>>;
  readonly logger: Logger;
  readonly clock: Clock;
  /** `timeoutInSeconds` in ms, or null to wait forever. */
  readonly messageTimeoutMs: number | null;
  readonly exitTimeoutMs: number;
  readonly killTimeoutMs: number;
  /** Record bytes kept per shard for replaying to a restarted child. */
  readonly replayBufferMaxBytes: number;
  /** Record bytes kept for replay by every shard together (`kcl.replayBufferTotalMaxBytes`). */
  readonly replayBudget?: ReplayMemoryBudget;
  /**
   * Child failures in a row without progress after which the shard's lease is given up
   * (`kcl.childFailureLimit`); 0 never gives up. Default 5.
   */
  readonly childFailureLimit?: number;
  /** Told about every child failure (after the child was ended), e.g. to stop like the Java daemon. */
  readonly onChildFailure?: (error: MultiLangChildError) => void;
  /** Told when a shard's lease is given up (see `MultiLangShardGivenUpError`). */
  readonly onShardGivenUp?: (error: MultiLangShardGivenUpError) => void;
  /** Receives every child session while it runs, so a forced stop can end them all. */
  readonly sessions?: Set<ChildSession>;
  readonly launcher?: ChildLauncher;
  readonly signalChild?: ChildSignaller;
}
