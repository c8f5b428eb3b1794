import type { MultiLangChildError } from './multilang-errors.js';
import { MultiLangShardGivenUpError } from './multilang-errors.js';

/** `kcl.childFailureLimit` when not set. */
export const DEFAULT_CHILD_FAILURE_LIMIT = 5;

/**
 * The child failures of one shard since its last progress (a batch acknowledged, a checkpoint moved
 * forward), and whether they use up `kcl.childFailureLimit` (0: never). A child that can never work (a
 * missing interpreter, a poison record) would otherwise keep the lease forever.
 */
export class ChildFailureBudget {
  readonly limit: number;
  #failures = 0;
  #lastFailure: MultiLangChildError | null = null;

  constructor(limit = DEFAULT_CHILD_FAILURE_LIMIT) {
    this.limit = limit;
  }

  /** Failures since the last progress. */
  get failures(): number {
    return this.#failures;
  }

  get exhausted(): boolean {
    return this.limit > 0 && this.#failures >= this.limit;
  }

  failed(error: MultiLangChildError): void {
    this.#failures += 1;
    this.#lastFailure = error;
  }

  progressed(): void {
    this.#failures = 0;
  }

  /** The error that gives the lease up, once the budget is spent; null before. */
  givenUpError(leaseKey: string, shardId: string): MultiLangShardGivenUpError | null {
    if (!this.exhausted) return null;
    const failures = this.#failures;
    const cause = this.#lastFailure;
    return new MultiLangShardGivenUpError(
      leaseKey,
      shardId,
      'failure-limit',
      `${failures} child failures in a row without progress (kcl.childFailureLimit = ${this.limit}); the last: ${cause?.message ?? 'unknown'}. Releasing the lease so another worker can try from the last checkpoint; fix the child (see its log lines) or the record it fails on`,
      { failures, cause },
    );
  }
}
