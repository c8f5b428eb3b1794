import { describe, expect, it } from 'vitest';
import { systemClock, systemRandom } from './clock.js';
import { ConfigurationError } from './errors.js';
import { noopLogger } from './logger.js';
import { OptionProblems } from './option-problems.js';

function thrown(check: OptionProblems): ConfigurationError {
  try {
    check.throwIfAny();
  } catch (error) {
    if (ConfigurationError.is(error)) return error;
    throw error;
  }
  throw new Error('expected a ConfigurationError');
}

describe('OptionProblems', () => {
  it('returns given values and defaults, and throws nothing when every option is valid', () => {
    const check = new OptionProblems('@kcl/x create');
    expect(check.integer('size', 5, 10, { min: 1 })).toBe(5);
    expect(check.integer('size', undefined, 10, { min: 1 })).toBe(10);
    expect(check.optionalInteger('limit', undefined)).toBeUndefined();
    expect(check.optionalInteger('limit', 3, { min: 1 })).toBe(3);
    expect(check.number('ratio', 0.5, 1, { min: 0, max: 1 })).toBe(0.5);
    expect(check.boolean('flag', undefined, true)).toBe(true);
    expect(check.string('name', 'app')).toBe('app');
    expect(check.string('table', undefined, 'kcl_leases')).toBe('kcl_leases');
    expect(check.oneOf('level', 'SUMMARY', ['NONE', 'SUMMARY'] as const, 'NONE')).toBe('SUMMARY');
    expect(check.clock('clock', undefined, systemClock)).toBe(systemClock);
    expect(check.logger('logger', noopLogger, systemClock as never)).toBe(noopLogger);
    expect(check.random('random', undefined, systemRandom)).toBe(systemRandom);
    expect(check.retryDelays('retry', { maxMs: 50 }, { initialMs: 10, maxMs: 100 })).toEqual({
      initialMs: 10,
      maxMs: 50,
    });
    expect(check.problems).toEqual([]);
    expect(() => check.throwIfAny()).not.toThrow();
  });

  it('collects every problem and throws them together, returning the defaults meanwhile', () => {
    const check = new OptionProblems('@kcl/x create');
    expect(check.integer('size', 0, 10, { min: 1 })).toBe(10);
    expect(check.integer('count', 2.5, 4)).toBe(4);
    expect(check.optionalInteger('limit', -1, { min: 1 })).toBeUndefined();
    expect(check.number('ratio', Number.NaN, 1, { min: 0, max: 1 })).toBe(1);
    expect(check.boolean('flag', 'yes', false)).toBe(false);
    expect(check.string('name', undefined, undefined, 'it names the application')).toBe('');
    expect(check.string('worker', '  ')).toBe('');
    expect(check.oneOf('level', 'LOUD', ['NONE', 'SUMMARY'] as const, 'NONE')).toBe('NONE');
    check.optionalFunction('onError', 42, '(error) => void');
    check.logger('logger', { info: () => {} }, noopLogger);
    check.signal('signal', {});
    check.retryDelays('retry', { initialMs: 100, maxMs: 10 }, { initialMs: 1, maxMs: 2 });
    const error = thrown(check);
    expect(error.code).toBe('CONFIGURATION');
    expect(error.problems).toEqual([
      'size must be an integer from 1 to ∞, got 0',
      'count must be an integer from 0 to ∞, got 2.5',
      'limit must be an integer from 1 to ∞, got -1',
      'ratio must be a number from 0 to 1, got NaN',
      'flag must be true or false, got "yes"',
      'name is required: it names the application',
      'worker must be a non-empty string, got "  "',
      'level must be one of NONE, SUMMARY, got "LOUD"',
      'onError must be a function (error) => void',
      'logger must be a Logger from @kcl/core (an object with debug, info, warn, error)',
      'signal must be an AbortSignal',
      'retry needs 0 < initialMs ≤ maxMs, got {"initialMs":100,"maxMs":10}',
    ]);
    expect(error.message).toMatch(/^@kcl\/x create: invalid configuration \(12 problems\)/);
  });

  it('names nested options by their path and collects them with the outer ones', () => {
    const check = new OptionProblems('@kcl/consumer createConsumer');
    const pipeline = check.within('pipeline');
    const processors = pipeline.within('processors');
    processors.integer('maxDemand', 0, 10, { min: 1 });
    pipeline.unknownKeys('', { handleMessage: 1, handelBatch: 2 }, ['handleMessage', 'handleBatch']);
    pipeline.unknownKeys('batchers', { size: 1, sise: 2, region: 3 }, ['size']);
    check.add('processor and pipeline are both set: give exactly one');
    expect(check.problems).toEqual([
      'pipeline.processors.maxDemand must be an integer from 1 to ∞, got 0',
      'pipeline.handelBatch is not an option: did you mean `handleBatch`?',
      'pipeline.batchers.sise is not an option: did you mean `size`?',
      'pipeline.batchers.region is not an option (known: size)',
      'processor and pipeline are both set: give exactly one',
    ]);
    expect(pipeline.problems).toBe(check.problems);
  });
});
