import type { Clock, RandomSource } from './clock.js';
import { closestName } from './closest-name.js';
import { ConfigurationError } from './errors.js';
import type { Logger } from './logger.js';

/** Bounds of a numeric option; both ends are inclusive. */
export interface NumberBounds {
  readonly min?: number;
  readonly max?: number;
}

/** A backoff: the first wait and the longest one. */
export interface RetryDelays {
  readonly initialMs: number;
  readonly maxMs: number;
}

/**
 * Collects every problem with a set of options, then throws one `ConfigurationError` that lists them
 * all, so a user fixes a configuration in one round rather than one error at a time.
 *
 * Each check takes the option's name (as the user writes it, e.g. `pipeline.processors.maxDemand`),
 * the given value and, where the option has one, the default; it returns the value to use (the
 * default when the value is missing or wrong) and records a problem when the value is wrong.
 *
 * ```ts
 * const check = new OptionProblems('@kcl/store-sql createSqlLeaseStore');
 * const poolSize = check.integer('poolSize', options.poolSize, 10, { min: 1 });
 * const logger = check.logger('logger', options.logger);
 * check.throwIfAny();
 * ```
 */
export class OptionProblems {
  readonly component: string;
  #prefix: string;
  #problems: string[];

  /** `component` starts the error's message: the package and the call, e.g. `@kcl/consumer createConsumer`. */
  constructor(component: string) {
    this.component = component;
    this.#prefix = '';
    this.#problems = [];
  }

  /** The problems found so far. */
  get problems(): readonly string[] {
    return this.#problems;
  }

  /**
   * The same collection, naming options under `prefix` (`pipeline` turns `maxDemand` into
   * `pipeline.maxDemand`), for a nested object of options.
   */
  within(prefix: string): OptionProblems {
    const nested = new OptionProblems(this.component);
    nested.#problems = this.#problems;
    nested.#prefix = this.#name(prefix);
    return nested;
  }

  #name(name: string): string {
    return this.#prefix === '' ? name : `${this.#prefix}.${name}`;
  }

  /** Records a problem in words of its own (for rules between options, or beyond the checks here). */
  add(problem: string): void {
    this.#problems.push(problem);
  }

  /** An integer in `bounds` (default: 0 and up); `fallback` when undefined. */
  integer(name: string, value: unknown, fallback: number, bounds: NumberBounds = {}): number {
    if (value === undefined) return fallback;
    const min = bounds.min ?? 0;
    const max = bounds.max ?? Number.MAX_SAFE_INTEGER;
    if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
      this.add(`${this.#name(name)} must be an integer from ${min} to ${upper(max)}, got ${show(value)}`);
      return fallback;
    }
    return value;
  }

  /** Like `integer`, but undefined stays undefined (an option without a default). */
  optionalInteger(name: string, value: unknown, bounds: NumberBounds = {}): number | undefined {
    if (value === undefined) return undefined;
    const checked = this.integer(name, value, Number.NaN, bounds);
    return Number.isNaN(checked) ? undefined : checked;
  }

  /** A finite number in `bounds`; `fallback` when undefined. */
  number(name: string, value: unknown, fallback: number, bounds: NumberBounds = {}): number {
    if (value === undefined) return fallback;
    const min = bounds.min ?? Number.NEGATIVE_INFINITY;
    const max = bounds.max ?? Number.POSITIVE_INFINITY;
    if (typeof value !== 'number' || !Number.isFinite(value) || value < min || value > max) {
      this.add(`${this.#name(name)} must be a number from ${min} to ${upper(max)}, got ${show(value)}`);
      return fallback;
    }
    return value;
  }

  /** `true` or `false`; `fallback` when undefined. */
  boolean(name: string, value: unknown, fallback: boolean): boolean {
    if (value === undefined) return fallback;
    if (typeof value !== 'boolean') {
      this.add(`${this.#name(name)} must be true or false, got ${show(value)}`);
      return fallback;
    }
    return value;
  }

  /**
   * A non-empty string (after trimming); `fallback` when undefined. A required option passes no
   * fallback and says what it is for in `purpose`.
   */
  string(name: string, value: unknown, fallback?: string, purpose?: string): string {
    if (value === undefined && fallback !== undefined) return fallback;
    if (typeof value !== 'string' || value.trim() === '') {
      const why = purpose === undefined ? '' : `: ${purpose}`;
      this.add(
        value === undefined
          ? `${this.#name(name)} is required${why}`
          : `${this.#name(name)} must be a non-empty string${why}, got ${show(value)}`,
      );
      return fallback ?? '';
    }
    return value;
  }

  /** One of `allowed`; `fallback` when undefined. */
  oneOf<T extends string>(name: string, value: unknown, allowed: readonly T[], fallback: T): T {
    if (value === undefined) return fallback;
    if (typeof value !== 'string' || !(allowed as readonly string[]).includes(value)) {
      this.add(`${this.#name(name)} must be one of ${allowed.join(', ')}, got ${show(value)}`);
      return fallback;
    }
    return value as T;
  }

  /** A function, when given; `shape` describes it in the problem, e.g. `(error) => 'retry' | 'skip'`. */
  optionalFunction<T>(name: string, value: unknown, shape: string): T | undefined {
    if (value === undefined) return undefined;
    if (typeof value !== 'function') {
      this.add(`${this.#name(name)} must be a function ${shape}`);
      return undefined;
    }
    return value as T;
  }

  /** An object with the given methods, when given (a client, a sink); `what` names it in the problem. */
  optionalObjectWith<T>(
    name: string,
    value: unknown,
    methods: readonly string[],
    what: string,
  ): T | undefined {
    if (value === undefined) return undefined;
    if (!hasMethods(value, methods)) {
      this.add(`${this.#name(name)} must be ${what} (an object with ${methods.join(', ')})`);
      return undefined;
    }
    return value as T;
  }

  /** A `Clock` from @kcl/core; `fallback` when undefined. */
  clock(name: string, value: unknown, fallback: Clock): Clock {
    return (
      this.optionalObjectWith<Clock>(
        name,
        value,
        ['now', 'monotonicNow', 'sleep'],
        'a Clock from @kcl/core',
      ) ?? fallback
    );
  }

  /** A `Logger` from @kcl/core; `fallback` when undefined. */
  logger(name: string, value: unknown, fallback: Logger): Logger {
    return (
      this.optionalObjectWith<Logger>(
        name,
        value,
        ['debug', 'info', 'warn', 'error'],
        'a Logger from @kcl/core',
      ) ?? fallback
    );
  }

  /** A `RandomSource` (numbers in [0, 1)); `fallback` when undefined. */
  random(name: string, value: unknown, fallback: RandomSource): RandomSource {
    return this.optionalFunction<RandomSource>(name, value, 'returning numbers in [0, 1)') ?? fallback;
  }

  /** An `AbortSignal`, when given. */
  signal(name: string, value: unknown): AbortSignal | undefined {
    if (value === undefined) return undefined;
    if (!(value instanceof AbortSignal)) {
      this.add(`${this.#name(name)} must be an AbortSignal`);
      return undefined;
    }
    return value;
  }

  /** A backoff `{ initialMs?, maxMs? }` with 0 < initialMs ≤ maxMs; missing parts take the defaults. */
  retryDelays(name: string, value: unknown, defaults: RetryDelays): RetryDelays {
    if (value === undefined) return defaults;
    if (value === null || typeof value !== 'object') {
      this.add(`${this.#name(name)} must be { initialMs?, maxMs? }, got ${show(value)}`);
      return defaults;
    }
    const given = value as { initialMs?: unknown; maxMs?: unknown };
    const initialMs = given.initialMs ?? defaults.initialMs;
    const maxMs = given.maxMs ?? defaults.maxMs;
    if (
      typeof initialMs !== 'number' ||
      typeof maxMs !== 'number' ||
      !Number.isFinite(initialMs) ||
      !Number.isFinite(maxMs) ||
      initialMs <= 0 ||
      maxMs < initialMs
    ) {
      this.add(`${this.#name(name)} needs 0 < initialMs ≤ maxMs, got ${show(value)}`);
      return defaults;
    }
    return { initialMs, maxMs };
  }

  /**
   * Records every key of `value` that is not in `known` (a typo, or an option of another release),
   * with the closest known key as a suggestion, else the list of known keys.
   */
  unknownKeys(name: string, value: object, known: readonly string[]): void {
    for (const key of Object.keys(value)) {
      if (!known.includes(key)) {
        const path = name === '' ? this.#name(key) : `${this.#name(name)}.${key}`;
        const suggestion = closestName(key, known);
        this.add(
          suggestion === null
            ? `${path} is not an option (known: ${known.join(', ')})`
            : `${path} is not an option: did you mean \`${suggestion}\`?`,
        );
      }
    }
  }

  /** Throws one `ConfigurationError` listing every problem, if there is any. */
  throwIfAny(): void {
    if (this.#problems.length > 0) throw new ConfigurationError(this.component, this.#problems);
  }
}

function hasMethods(value: unknown, methods: readonly string[]): boolean {
  if (value === null || (typeof value !== 'object' && typeof value !== 'function')) return false;
  const record = value as Record<string, unknown>;
  return methods.every((method) => typeof record[method] === 'function');
}

function upper(max: number): string {
  return max === Number.MAX_SAFE_INTEGER || max === Number.POSITIVE_INFINITY ? '∞' : String(max);
}

function show(value: unknown): string {
  if (typeof value === 'function') return 'a function';
  if (typeof value === 'bigint') return `${value}n`;
  if (typeof value === 'number' && !Number.isFinite(value)) return String(value);
  try {
    return JSON.stringify(value) ?? String(value);
  } catch {
    return String(value);
  }
}
