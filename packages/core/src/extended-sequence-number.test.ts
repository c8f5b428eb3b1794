import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { InvalidSequenceNumberError } from './errors.js';
import { ExtendedSequenceNumber } from './extended-sequence-number.js';

const of = ExtendedSequenceNumber.of;

describe('ExtendedSequenceNumber', () => {
  it('orders sentinels AT_TIMESTAMP < TRIM_HORIZON < LATEST < numbers < SHARD_END', () => {
    const ordered = [
      ExtendedSequenceNumber.AT_TIMESTAMP,
      ExtendedSequenceNumber.TRIM_HORIZON,
      ExtendedSequenceNumber.LATEST,
      of('0'),
      of('0', 1),
      of('49590338271490256608559692538361571095921575989136588898'),
      ExtendedSequenceNumber.SHARD_END,
    ];
    const shuffled = [...ordered].reverse();
    shuffled.sort(ExtendedSequenceNumber.compare);
    expect(shuffled.map(String)).toEqual(ordered.map(String));
  });

  it('compares sequence numbers beyond 2^64 as integers, not as strings or floats', () => {
    const a = of('18446744073709551616'); // 2^64
    const b = of('18446744073709551617');
    const c = of('9999999999999999999'); // fewer digits, smaller
    expect(a.isBefore(b)).toBe(true);
    expect(c.isBefore(a)).toBe(true);
    // Two 56-digit numbers that are equal as doubles.
    const x = of('49590338271490256608559692538361571095921575989136588898');
    const y = of('49590338271490256608559692538361571095921575989136588899');
    expect(Number(x.sequenceNumber)).toBe(Number(y.sequenceNumber));
    expect(x.compareTo(y)).toBe(-1);
  });

  it('breaks ties with the sub-sequence number', () => {
    expect(of('100', 2).compareTo(of('100', 1))).toBe(1);
    expect(of('100', 1).compareTo(of('100', 1))).toBe(0);
    expect(of('99', 7).compareTo(of('100', 0))).toBe(-1);
  });

  it('returns the shared sentinel instances and reports them', () => {
    expect(of('SHARD_END')).toBe(ExtendedSequenceNumber.SHARD_END);
    expect(of('LATEST').isSentinel).toBe(true);
    expect(of('LATEST').sentinel).toBe('LATEST');
    expect(of('123').sentinel).toBeNull();
    expect(ExtendedSequenceNumber.SHARD_END.isShardEnd).toBe(true);
  });

  it.each([
    ['', 0],
    ['-1', 0],
    ['12a', 0],
    [' 12', 0],
    ['1.5', 0],
    ['latest', 0],
    ['SHARD_END', 1],
    ['12', -1],
    ['12', 1.5],
  ])('rejects %j with sub-sequence %j', (value, sub) => {
    expect(() => of(value, sub)).toThrow(InvalidSequenceNumberError);
    expect(ExtendedSequenceNumber.tryOf(value, sub)).toBeNull();
  });

  it('carries a timestamp on AT_TIMESTAMP, through of() as stores read it back', () => {
    const time = new Date('2026-03-04T05:06:07.089Z');
    const position = ExtendedSequenceNumber.atTimestamp(time);
    expect(position.sentinel).toBe('AT_TIMESTAMP');
    expect(position.timestamp).toEqual(time);
    expect(position.toString()).toBe('AT_TIMESTAMP 2026-03-04T05:06:07.089Z');
    const stored = of(position.sequenceNumber, position.subSequenceNumber);
    expect(stored.equals(position)).toBe(true);
    expect(stored.timestamp).toEqual(time);
    expect(stored.isBefore(of('TRIM_HORIZON'))).toBe(true);
    expect(ExtendedSequenceNumber.AT_TIMESTAMP.timestamp).toBeNull();
    expect(() => ExtendedSequenceNumber.atTimestamp(new Date('nope'))).toThrow(InvalidSequenceNumberError);
  });

  it('names the bad value and the accepted forms in the error', () => {
    expect(() => of('abc')).toThrow(/"abc" is not a sequence number: expected a decimal string/);
  });

  it('formats with the sub-sequence number only when present', () => {
    expect(of('123').toString()).toBe('123');
    expect(of('123', 4).toString()).toBe('123/4');
    expect(JSON.stringify(of('5', 2))).toBe('{"sequenceNumber":"5","subSequenceNumber":2}');
  });

  it('agrees with BigInt ordering for arbitrary numbers (property)', () => {
    const big = fc.bigInt({ min: 0n, max: (1n << 200n) - 1n });
    const sub = fc.nat({ max: 10_000 });
    fc.assert(
      fc.property(big, sub, big, sub, (a, as, b, bs) => {
        const expected = a === b ? Math.sign(as - bs) : a < b ? -1 : 1;
        const result = of(a.toString(), as).compareTo(of(b.toString(), bs));
        expect(result).toBe(expected);
        expect(of(b.toString(), bs).compareTo(of(a.toString(), as))).toBe(-expected);
      }),
    );
  });
});
