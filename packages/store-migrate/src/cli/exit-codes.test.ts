import { ConfigurationError, LeaseStoreError } from '@kcl/core';
import { describe, expect, it } from 'vitest';
import {
  LiveMigrationRefusedError,
  MigrationInterruptedError,
  MigrationTargetChangingError,
} from '../migration-errors.js';
import { EXIT_CODES, exitCodeOfError } from './exit-codes.js';

/** An error as another copy of the package builds it: the same markers, another class object. */
function fromAnotherCopy(className: string, code: string): Error {
  const error = Object.assign(new Error(`${className} from another copy`), { code, retryable: false });
  for (const marker of ['@kcl/error', `@kcl/error/${className}`]) {
    Object.defineProperty(error, Symbol.for(marker), { value: true });
  }
  return error;
}

describe('exitCodeOfError', () => {
  it.each<[string, unknown, number]>([
    ['a refusal', new LiveMigrationRefusedError('the cut-over', ['no']), EXIT_CODES.refused],
    ['invalid options', new ConfigurationError('kcl-migrate', ['no']), EXIT_CODES.usage],
    ['an interruption', new MigrationInterruptedError(), EXIT_CODES.interrupted],
    ['a store failure', new LeaseStoreError('a store', 'down'), EXIT_CODES.failed],
    [
      'a target that keeps changing',
      new MigrationTargetChangingError('a store', 'shard-1'),
      EXIT_CODES.failed,
    ],
    ['anything else', new Error('boom'), EXIT_CODES.failed],
    [
      'a refusal from another copy of the package',
      fromAnotherCopy('LiveMigrationRefusedError', 'MIGRATION_REFUSED'),
      EXIT_CODES.refused,
    ],
    [
      'an interruption from another copy of the package',
      fromAnotherCopy('MigrationInterruptedError', 'MIGRATION_INTERRUPTED'),
      EXIT_CODES.interrupted,
    ],
  ])('%s', (_name, error, exitCode) => {
    expect(exitCodeOfError(error)).toBe(exitCode);
  });

  it('gives this package’s errors their own codes', () => {
    expect(new LiveMigrationRefusedError('a step', ['x']).code).toBe('MIGRATION_REFUSED');
    expect(new MigrationInterruptedError().code).toBe('MIGRATION_INTERRUPTED');
    const changing = new MigrationTargetChangingError('a store', 'shard-1');
    expect([changing.code, changing.retryable]).toEqual(['MIGRATION_TARGET_CHANGING', true]);
    expect(changing.message).toMatch(/^@kcl\/store-migrate: lease "shard-1" kept changing/);
  });
});
