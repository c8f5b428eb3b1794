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
      '--streams',
      '3',
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
        streams: 3,
        shards: 2,
        store: 'postgres',
        postgresUrl: 'postgres://kcl@db.example:5433/kcl',
        rate: 500,
        keys: 150,
        tty: false,
        keep: true,
        dashboardPort: null,
        exactlyOnce: false,
        help: false,
      },
    });
  });

  it('serves the dashboard on a port with --dashboard', () => {
    expect(parseDemoOptions(['--dashboard'])).toMatchObject({ ok: true, options: { dashboardPort: 8080 } });
    expect(parseDemoOptions(['--dashboard-port', '0'])).toMatchObject({
      ok: true,
      options: { dashboardPort: 0 },
    });
    expect(parseDemoOptions(['--dashboard-port', 'x'])).toMatchObject({ ok: false });
  });

  it('accepts --exactly-once with the SQLite store only', () => {
    expect(parseDemoOptions(['--exactly-once'])).toMatchObject({ ok: true, options: { exactlyOnce: true } });
    expect(parseDemoOptions(['--exactly-once', '--store', 'dynamo-local'])).toEqual({
      ok: false,
      problems: [
        '--exactly-once needs --store sqlite: a DynamoDB lease store cannot checkpoint in the application’s transaction',
      ],
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
      '--streams',
      '0',
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
      '--streams must be a whole number from 1 to 8 (got "0")',
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

describe('--streams', () => {
  it('is 1 by default and takes 1 to 8', () => {
    expect(DEMO_DEFAULTS.streams).toBe(1);
    expect(parseDemoOptions(['--streams', '1'])).toMatchObject({ ok: true, options: { streams: 1 } });
    expect(parseDemoOptions(['--streams=8', '--shards', '4'])).toMatchObject({
      ok: true,
      options: { streams: 8, shards: 4 },
    });
  });

  it('refuses values that are not a whole number from 1 to 8, and a missing value', () => {
    for (const value of ['0', '9', '-1', '1.5', 'two', '2x'])
      expect(parseDemoOptions(['--streams', value])).toEqual({
        ok: false,
        problems: [`--streams must be a whole number from 1 to 8 (got "${value}")`],
      });
    expect(parseDemoOptions(['--streams'])).toEqual({ ok: false, problems: ['--streams needs a value'] });
    expect(parseDemoOptions(['--streams', '--no-tty'])).toEqual({
      ok: false,
      problems: ['--streams needs a value'],
    });
  });

  it('refuses more than 32 shards over all streams', () => {
    expect(parseDemoOptions(['--streams', '3', '--shards', '11'])).toEqual({
      ok: false,
      problems: [
        '--streams 3 with --shards 11 make 33 shards in all, more than the demo runs (32): use fewer --streams or --shards',
      ],
    });
    expect(parseDemoOptions(['--streams', '2', '--shards', '16'])).toMatchObject({ ok: true });
  });

  it('counts the shards of every stream for the write limit', () => {
    expect(parseDemoOptions(['--streams', '2', '--shards', '1', '--rate', '2000'])).toMatchObject({
      ok: true,
    });
    expect(parseDemoOptions(['--streams', '2', '--shards', '1', '--rate', '2001'])).toEqual({
      ok: false,
      problems: [
        '--rate 2001 is more than 2 streams of 1 shard accept (Kinesis takes 1000 records/s per shard): use --rate 2000 or less, or more --shards',
      ],
    });
  });
});
