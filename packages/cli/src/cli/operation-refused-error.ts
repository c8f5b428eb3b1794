import { KclError } from '@kcl/core';

/**
 * A change the CLI would not make: workers are live (and `--force` was not given), or it was not
 * confirmed. Nothing was written. Code `CLI_REFUSED`.
 */
export class OperationRefusedError extends KclError {
  readonly problems: readonly string[];

  constructor(operation: string, problems: readonly string[]) {
    super('CLI_REFUSED', `${operation} refused:\n${problems.map((problem) => `  - ${problem}`).join('\n')}`);
    this.problems = [...problems];
  }

  static override is(value: unknown): value is OperationRefusedError {
    return KclError.isClass(value, 'OperationRefusedError');
  }
}
