import { describe, expect, it } from 'vitest';
import { DEMO_DEFAULTS, parseDemoOptions } from './demo-options.js';

describe('parseDemoOptions', () => {
  it('gives the defaults without arguments', () => {
    expect(parseDemoOptions([])).toEqual({ ok: true, options: DEMO_DEFAULTS });
  });

  it('reads every option, with separate and inline values', () => {
    const parsed = parseDemoOptions([
      '--duration',
      '30',
      '--workers=4',
      '--shards',
      '2',
      '--store',
      'postgres',
      '--postgres-url',
      'postgres://kcl@db.example:5433/kcl',
      '--rate',
      '500',
      '--keys=150',
      '--no-tty',
      '--keep',
    ]);
    expect(parsed).toEqual({
      ok: true,
      options: {
        durationSeconds: 30,
        workers: 4,
        shards: 2,
        store: 'postgres',
        postgresUrl: 'postgres://kcl@db.example:5433/kcl',
        rate: 500,
        keys: 150,
        tty: false,
        keep: true,
        help: false,
      },
    });
  });

  it('accepts -h and --help', () => {
    expect(parseDemoOptions(['-h'])).toMatchObject({ ok: true, options: { help: true } });
    expect(parseDemoOptions(['--help'])).toMatchObject({ ok: true, options: { help: true } });
  });

  it('lists every problem at once', () => {
    const parsed = parseDemoOptions([
      '--duration',
      '5',
      '--workers',
      'three',
      '--shards',
      '0',
      '--store',
      'mysql',
      '--rate',
      '-3',
      '--keys',
      '50',
      '--colour',
      'extra',
      '--keep=yes',
    ]);
    expect(parsed.ok).toBe(false);
    if (parsed.ok) return;
    expect(parsed.problems).toEqual([
      'unknown option --colour',
      'unexpected argument "extra"',
      '--keep takes no value',
      '--duration must be a whole number from 20 to 3600 (got "5")',
      '--workers must be a whole number from 2 to 10 (got "three")',
      '--shards must be a whole number from 1 to 16 (got "0")',
      '--rate must be a whole number from 1 to 5000 (got "-3")',
      '--keys must be a whole number from 100 to 100000 (got "50")',
      '--store must be one of sqlite, postgres, dynamo-local (got "mysql")',
    ]);
  });

  it('does not take the next option as the value of an option given without one', () => {
    const parsed = parseDemoOptions(['--workers', '--shards', '2', '--duration']);
    expect(parsed).toEqual({
      ok: false,
      problems: ['--workers needs a value', '--duration needs a value'],
    });
  });

  it('rejects --postgres-url without --store postgres, and a URL that is not postgres://', () => {
    expect(parseDemoOptions(['--postgres-url', 'postgres://127.0.0.1/x'])).toEqual({
      ok: false,
      problems: ['--postgres-url applies only with --store postgres'],
    });
    expect(parseDemoOptions(['--store', 'postgres', '--postgres-url', 'mysql://127.0.0.1/x'])).toEqual({
      ok: false,
      problems: ['--postgres-url must be a postgres:// URL (got "mysql://127.0.0.1/x")'],
    });
  });

  it('accepts the dynamo-local store', () => {
    expect(parseDemoOptions(['--store', 'dynamo-local'])).toMatchObject({
      ok: true,
      options: { store: 'dynamo-local' },
    });
  });
});

describe('the write limit', () => {
  it('refuses a rate the shards would not accept', () => {
    expect(parseDemoOptions(['--rate', '2500', '--shards', '2'])).toEqual({
      ok: false,
      problems: [
        '--rate 2500 is more than 2 shards accept (Kinesis takes 1000 records/s per shard): use --rate 2000 or less, or more --shards',
      ],
    });
    expect(parseDemoOptions(['--rate', '2000', '--shards', '2'])).toMatchObject({ ok: true });
  });
});
