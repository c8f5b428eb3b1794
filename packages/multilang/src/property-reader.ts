import type { NumberBounds } from '@kcl/core';
import { OptionProblems } from '@kcl/core';
import type { CredentialsSource } from './credentials-provider.js';
import { resolveCredentialsProvider } from './credentials-provider.js';
import type { ParsedProperties } from './properties-parser.js';
import {
  canonicalPropertyKey,
  findPropertyDefinition,
  NO_EFFECT_PREFIXES,
  suggestPropertyKey,
} from './property-catalogue.js';

/** Properties as parsed from a file, or as a map or plain object. */
export type PropertyInput = ParsedProperties | ReadonlyMap<string, string> | Readonly<Record<string, string>>;

const TRUE_WORDS = new Set(['true', 'yes', 'y', 'on', '1']);
const FALSE_WORDS = new Set(['false', 'no', 'n', 'off', '0']);

/**
 * The known keys of a properties file with their values as text, read into typed values. Every
 * invalid value is a problem in one `OptionProblems` (thrown at once by `throwIfAny`); unknown keys,
 * keys without effect and values that are accepted but not honoured are warnings; how the file was
 * read (derived values, rewritten paths) goes to the notices.
 */
export class PropertyReader {
  readonly problems: OptionProblems;
  readonly warnings: string[] = [];
  readonly notices: string[] = [];
  readonly #values = new Map<string, string>();
  /** Every known key given a value, also those that have no effect here. */
  readonly #given = new Set<string>();

  constructor(properties: PropertyInput, component: string) {
    this.problems = new OptionProblems(component);
    for (const [rawKey, rawValue] of this.#pairs(properties)) this.#accept(rawKey, rawValue.trim());
  }

  has(key: string): boolean {
    return this.#values.has(key);
  }

  /**
   * True when the file gives `key` a value, also when the key has no effect here (its value is not
   * kept): setting some of those still changes a decision, as the Java daemon makes it.
   */
  given(key: string): boolean {
    return this.#given.has(key);
  }

  /** The value of `key`, trimmed, or null when it is not set. */
  text(key: string): string | null {
    return this.#values.get(key) ?? null;
  }

  /** A required value; `purpose` says what it is for in the problem when it is missing. */
  required(key: string, purpose: string): string | null {
    const value = this.text(key);
    if (value === null) this.problems.string(key, undefined, undefined, purpose);
    return value;
  }

  /** A whole number in `bounds` (both ends inclusive); `fallback` when unset or invalid. */
  integer(key: string, fallback: number, bounds: NumberBounds): number {
    return this.problems.integer(key, wholeNumber(this.#values.get(key)), fallback, bounds);
  }

  /** Like `integer`, but null when unset. */
  optionalInteger(key: string, bounds: NumberBounds): number | null {
    return this.problems.optionalInteger(key, wholeNumber(this.#values.get(key)), bounds) ?? null;
  }

  /** `true`/`yes`/`on`/`1` or `false`/`no`/`off`/`0`, in any case; `fallback` when unset or invalid. */
  boolean(key: string, fallback: boolean): boolean {
    const value = this.#values.get(key);
    const lower = value?.toLowerCase();
    const word =
      lower === undefined ? undefined : TRUE_WORDS.has(lower) ? true : FALSE_WORDS.has(lower) ? false : value;
    return this.problems.boolean(key, word, fallback);
  }

  /** One of `allowed`, compared after folding the value's case; `fallback` when unset or invalid. */
  oneOf<T extends string>(key: string, allowed: readonly T[], fallback: T, fold: 'upper' | 'lower'): T {
    const value = this.#values.get(key);
    const folded = fold === 'upper' ? value?.toUpperCase() : value?.toLowerCase();
    const match = allowed.find((candidate) => candidate === folded);
    return this.problems.oneOf(key, match ?? value, allowed, fallback);
  }

  /** An `http://` or `https://` URL, or null when unset or invalid. */
  endpoint(key: string): string | null {
    const value = this.text(key);
    if (value === null) return null;
    if (!URL.canParse(value) || !['http:', 'https:'].includes(new URL(value).protocol)) {
      this.problems.add(`${key} must be an http:// or https:// URL, got ${JSON.stringify(value)}`);
      return null;
    }
    return value;
  }

  /** An `AwsCredentialsProvider…` value (see `resolveCredentialsProvider`); `fallback` when unset or invalid. */
  credentials(
    key: string,
    fallback: CredentialsSource,
    environment: Readonly<Record<string, string | undefined>>,
  ): CredentialsSource {
    const value = this.text(key);
    if (value === null) return fallback;
    const resolution = resolveCredentialsProvider(key, value, environment);
    for (const problem of resolution.problems) this.problems.add(problem);
    this.warnings.push(...resolution.warnings);
    return resolution.source ?? fallback;
  }

  /** Keeps a known key with a value; warns about every other one, by name. */
  #accept(rawKey: string, value: string): void {
    const key = canonicalPropertyKey(rawKey);
    const definition = findPropertyDefinition(key);
    if (definition === undefined) {
      const prefixed = NO_EFFECT_PREFIXES.find((entry) => key.startsWith(entry.prefix));
      if (prefixed !== undefined) {
        this.warnings.push(`property ${rawKey} has no effect in kcl-multilang: ${prefixed.reason}`);
      } else {
        const suggestion = suggestPropertyKey(key);
        this.warnings.push(
          `unknown property ${rawKey} is ignored${suggestion === null ? '' : ` (did you mean ${suggestion}? keys are case-sensitive)`}`,
        );
      }
    } else if (value === '') {
      this.warnings.push(`property ${rawKey} has an empty value and is ignored`);
    } else if (definition.support === 'no-effect') {
      this.#given.add(key);
      this.warnings.push(`property ${rawKey} has no effect in kcl-multilang: ${definition.meaning}`);
    } else {
      this.#given.add(key);
      this.#values.set(key, value);
    }
  }

  #pairs(properties: PropertyInput): [string, string][] {
    if (isParsedProperties(properties)) {
      for (const problem of properties.problems) this.problems.add(problem);
      return [...properties.values.values()].map((entry) => [entry.key, entry.value]);
    }
    if (properties instanceof Map) return [...properties.entries()];
    return Object.entries(properties as Readonly<Record<string, string>>);
  }
}

/** The number a property's text stands for, or the text itself when it is not a whole number. */
function wholeNumber(value: string | undefined): number | string | undefined {
  return value !== undefined && /^[+-]?\d+$/.test(value) ? Number(value) : value;
}

function isParsedProperties(value: PropertyInput): value is ParsedProperties {
  return (
    typeof value === 'object' &&
    value !== null &&
    !(value instanceof Map) &&
    'entries' in value &&
    'values' in value &&
    (value as ParsedProperties).values instanceof Map
  );
}
