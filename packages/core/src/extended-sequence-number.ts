import { InvalidSequenceNumberError } from './errors.js';

/** Checkpoint values that are positions rather than sequence numbers, as the Java KCL stores them. */
export type SentinelCheckpoint = 'TRIM_HORIZON' | 'LATEST' | 'AT_TIMESTAMP' | 'SHARD_END';

export const SENTINEL_CHECKPOINTS: readonly SentinelCheckpoint[] = [
  'AT_TIMESTAMP',
  'TRIM_HORIZON',
  'LATEST',
  'SHARD_END',
];

const DIGITS = /^[0-9]+$/;

/**
 * Rank of each sentinel against real sequence numbers. Real numbers are >= 0, so the three starting
 * positions sort below every record and SHARD_END above every record (the Java KCL's order).
 */
const SENTINEL_RANK: Readonly<Record<SentinelCheckpoint, bigint | 'end'>> = {
  AT_TIMESTAMP: -3n,
  TRIM_HORIZON: -2n,
  LATEST: -1n,
  SHARD_END: 'end',
};

export function isSentinelCheckpoint(value: string): value is SentinelCheckpoint {
  return Object.hasOwn(SENTINEL_RANK, value);
}

/**
 * A position in a shard: a Kinesis sequence number (a decimal string that may exceed 2^64, so it is
 * compared as a BigInt) or a sentinel, plus the KPL sub-sequence number of a record inside an aggregated
 * record (0 when not aggregated). Instances are immutable; build them with `ExtendedSequenceNumber.of`.
 */
export class ExtendedSequenceNumber {
  static readonly AT_TIMESTAMP = new ExtendedSequenceNumber('AT_TIMESTAMP', 0);
  static readonly TRIM_HORIZON = new ExtendedSequenceNumber('TRIM_HORIZON', 0);
  static readonly LATEST = new ExtendedSequenceNumber('LATEST', 0);
  static readonly SHARD_END = new ExtendedSequenceNumber('SHARD_END', 0);

  readonly sequenceNumber: string;
  readonly subSequenceNumber: number;
  #rank: bigint | 'end' | undefined;

  private constructor(sequenceNumber: string, subSequenceNumber: number) {
    this.sequenceNumber = sequenceNumber;
    this.subSequenceNumber = subSequenceNumber;
  }

  /**
   * Validates and builds a position. Throws `InvalidSequenceNumberError` for anything that is neither a
   * string of digits nor a sentinel, for a negative or fractional sub-sequence number, and for a
   * sentinel with a non-zero sub-sequence number.
   */
  static of(sequenceNumber: string, subSequenceNumber = 0): ExtendedSequenceNumber {
    if (typeof sequenceNumber !== 'string') {
      throw new InvalidSequenceNumberError(sequenceNumber, 'not a string');
    }
    if (!Number.isSafeInteger(subSequenceNumber) || subSequenceNumber < 0) {
      throw new InvalidSequenceNumberError(
        sequenceNumber,
        `sub-sequence number ${String(subSequenceNumber)} must be a non-negative integer`,
      );
    }
    if (isSentinelCheckpoint(sequenceNumber)) {
      if (sequenceNumber === 'AT_TIMESTAMP' && subSequenceNumber !== 0) {
        return new ExtendedSequenceNumber(sequenceNumber, subSequenceNumber);
      }
      if (subSequenceNumber !== 0) {
        throw new InvalidSequenceNumberError(
          sequenceNumber,
          `a sentinel has no sub-sequence number, got ${subSequenceNumber}`,
        );
      }
      return ExtendedSequenceNumber[sequenceNumber];
    }
    if (!DIGITS.test(sequenceNumber)) {
      throw new InvalidSequenceNumberError(sequenceNumber);
    }
    return new ExtendedSequenceNumber(sequenceNumber, subSequenceNumber);
  }

  /**
   * AT_TIMESTAMP with its own timestamp: reading resumes at the first record at or after `timestamp`
   * (the `kcl reset --to <time>` of a lease). The time is kept as the sub-sequence number (epoch
   * milliseconds), so every store carries it without a column of its own; a plain AT_TIMESTAMP
   * (sub-sequence number 0) uses the application's initial timestamp instead, as the Java KCL does.
   */
  static atTimestamp(timestamp: Date): ExtendedSequenceNumber {
    const time = timestamp instanceof Date ? timestamp.getTime() : Number.NaN;
    if (!Number.isSafeInteger(time) || time <= 0) {
      throw new InvalidSequenceNumberError(
        'AT_TIMESTAMP',
        `${String(timestamp)} is not a valid time after 1970`,
      );
    }
    return new ExtendedSequenceNumber('AT_TIMESTAMP', time);
  }

  /** Like `of`, but returns `null` instead of throwing. */
  static tryOf(sequenceNumber: string, subSequenceNumber = 0): ExtendedSequenceNumber | null {
    try {
      return ExtendedSequenceNumber.of(sequenceNumber, subSequenceNumber);
    } catch {
      return null;
    }
  }

  /** Orders a before b: negative, zero or positive. Sentinels and numbers as the Java KCL orders them. */
  static compare(a: ExtendedSequenceNumber, b: ExtendedSequenceNumber): number {
    return a.compareTo(b);
  }

  get isSentinel(): boolean {
    return isSentinelCheckpoint(this.sequenceNumber);
  }

  get isShardEnd(): boolean {
    return this.sequenceNumber === 'SHARD_END';
  }

  /** The time of an AT_TIMESTAMP position that carries its own (`atTimestamp`); null otherwise. */
  get timestamp(): Date | null {
    return this.sequenceNumber === 'AT_TIMESTAMP' && this.subSequenceNumber !== 0
      ? new Date(this.subSequenceNumber)
      : null;
  }

  /** The sentinel name, or null for a real sequence number. */
  get sentinel(): SentinelCheckpoint | null {
    return isSentinelCheckpoint(this.sequenceNumber) ? this.sequenceNumber : null;
  }

  compareTo(other: ExtendedSequenceNumber): number {
    const mine = this.#rankValue();
    const theirs = other.#rankValue();
    if (mine === 'end' || theirs === 'end') {
      if (mine === theirs) return 0;
      return mine === 'end' ? 1 : -1;
    }
    if (mine !== theirs) return mine < theirs ? -1 : 1;
    return Math.sign(this.subSequenceNumber - other.subSequenceNumber);
  }

  equals(other: ExtendedSequenceNumber): boolean {
    return this.compareTo(other) === 0;
  }

  isBefore(other: ExtendedSequenceNumber): boolean {
    return this.compareTo(other) < 0;
  }

  isAfter(other: ExtendedSequenceNumber): boolean {
    return this.compareTo(other) > 0;
  }

  /** `49590338271490256608559692538361571095921575989136588898` or `…898/3` with a sub-sequence number. */
  toString(): string {
    const timestamp = this.timestamp;
    if (timestamp !== null) return `AT_TIMESTAMP ${timestamp.toISOString()}`;
    return this.subSequenceNumber === 0
      ? this.sequenceNumber
      : `${this.sequenceNumber}/${this.subSequenceNumber}`;
  }

  toJSON(): { sequenceNumber: string; subSequenceNumber: number } {
    return { sequenceNumber: this.sequenceNumber, subSequenceNumber: this.subSequenceNumber };
  }

  #rankValue(): bigint | 'end' {
    if (this.#rank === undefined) {
      this.#rank = isSentinelCheckpoint(this.sequenceNumber)
        ? SENTINEL_RANK[this.sequenceNumber]
        : BigInt(this.sequenceNumber);
    }
    return this.#rank;
  }
}
