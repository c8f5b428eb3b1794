import { ConfigurationError } from '@kcl/core';
import { describe, expect, it } from 'vitest';
import {
  checkLeaseStoreLocation,
  describeLeaseStoreLocation,
  isLocalEndpoint,
  leaseStoreLocationProblems,
  parseLeaseStoreUrl,
  redactUrl,
} from './lease-store-location.js';

describe('parseLeaseStoreUrl', () => {
  it('reads every store kind, with the kcl parameters taken out of the connection URL', () => {
    expect(
      parseLeaseStoreUrl('postgresql://kcl:secret@db:5432/kcl?table=leases&poolSize=3&sslmode=require'),
    ).toEqual({
      kind: 'postgres',
      url: 'postgresql://kcl:secret@db:5432/kcl?sslmode=require',
      tableName: 'leases',
      poolSize: 3,
    });
    expect(parseLeaseStoreUrl('mariadb://root@127.0.0.1:3306/test')).toEqual({
      kind: 'mysql',
      url: 'mysql://root@127.0.0.1:3306/test',
    });
    expect(parseLeaseStoreUrl('sqlite:data/leases.db?table=kcl', '/srv/app')).toEqual({
      kind: 'sqlite',
      file: '/srv/app/data/leases.db',
      tableName: 'kcl',
    });
    expect(parseLeaseStoreUrl('sqlite:///var/lib/leases.db')).toEqual({
      kind: 'sqlite',
      file: '/var/lib/leases.db',
    });
    expect(
      parseLeaseStoreUrl(
        'dynamodb://billing-leases?region=eu-west-1&endpoint=http://localhost:4567&layout=shared',
      ),
    ).toEqual({
      kind: 'dynamo',
      tableName: 'billing-leases',
      region: 'eu-west-1',
      endpoint: 'http://localhost:4567',
      layout: 'shared',
    });
    expect(parseLeaseStoreUrl('dynamo://')).toEqual({ kind: 'dynamo' });
  });

  it('names every problem, and the forms that work, without printing a password', () => {
    const unknown = (() => {
      try {
        parseLeaseStoreUrl('redis://user:hunter2@cache');
      } catch (error) {
        return error;
      }
    })() as ConfigurationError;
    expect(ConfigurationError.is(unknown)).toBe(true);
    expect(unknown.message).toContain('postgres://user:password@host:5432/database');
    expect(unknown.message).not.toContain('hunter2');
    expect(() => parseLeaseStoreUrl('sqlite::memory:')).toThrow(/leases must outlive the process/);
    expect(() => parseLeaseStoreUrl('dynamo://t?layout=wide&endpoint=not a url')).toThrow(
      /layout=wide .* must be java or shared[\s\S]*endpoint "not a url" is not an http\(s\) URL/,
    );
    expect(() => parseLeaseStoreUrl('postgres://db/kcl?poolSize=0')).toThrow(
      /poolSize=0 must be a positive integer/,
    );
  });

  it('checks a location given as options: every problem at once, a misspelt option named', () => {
    const problems = (location: unknown): readonly string[] => {
      try {
        checkLeaseStoreLocation(location as never);
        return [];
      } catch (error) {
        if (!ConfigurationError.is(error)) throw error;
        expect(error.message).toMatch(/^@kcl\/stores openLeaseStore: invalid configuration/);
        return error.problems;
      }
    };
    expect(problems({ kind: 'postgres', url: 'postgres://db/kcl', poolSize: 2, tableName: 'kcl' })).toEqual(
      [],
    );
    expect(problems({ kind: 'postgres', url: 'postgres://db/kcl', poolsize: 2, poolSize: 0 })).toEqual([
      'poolsize is not an option: did you mean `poolSize`?',
      'poolSize must be an integer from 1 to ∞, got 0',
    ]);
    expect(problems({ kind: 'sqlite', file: ':memory:', mustExist: 'yes', tableName: '' })).toEqual([
      'tableName must be a non-empty string, got ""',
      'a sqlite location needs file: the database file (leases must outlive the process)',
      'mustExist must be true or false, got "yes"',
    ]);
    expect(problems({ kind: 'dynamo', layout: 'wide', endpoint: 'not a url', table: 't' })).toEqual([
      'table is not an option (known: kind, tableName, region, endpoint, layout, workerTableName, client, destroyClientOnClose)',
      'layout must be one of java, shared, got "wide"',
      'endpoint "not a url" is not an http(s) URL: use e.g. http://localhost:4567 or https://dynamodb.eu-west-1.amazonaws.com',
    ]);
    expect(problems({ kind: 'redis' })[0]).toMatch(/^kind must be one of postgres, mysql, sqlite, dynamo/);
  });

  it('describes a location without secrets', () => {
    expect(redactUrl('postgres://kcl:secret@db/kcl')).toBe('postgres://kcl:***@db/kcl');
    expect(describeLeaseStoreLocation(parseLeaseStoreUrl('mysql://root:pw@h/test'))).toBe(
      'mysql://root:***@h/test',
    );
    expect(describeLeaseStoreLocation({ kind: 'dynamo', tableName: 't', region: 'eu-west-1' })).toBe(
      'DynamoDB table t at AWS (eu-west-1)',
    );
  });
});

describe('leaseStoreLocationProblems', () => {
  it('finds a URL the driver would take for a host name, before anything connects', () => {
    const postgres = (url: string) =>
      leaseStoreLocationProblems({ kind: 'postgres', url }, { names: { url: '--postgres-url' } });
    expect(postgres('not-a-url')).toEqual([
      '--postgres-url "not-a-url" is not a URL: use postgres://user:password@host:5432/database',
    ]);
    expect(postgres('db.internal:5432/kcl')).toEqual([
      '--postgres-url "db.internal:5432/kcl" is not a PostgreSQL URL (it starts with db.internal:): use postgres://user:password@host:5432/database',
    ]);
    expect(postgres('mysql://root:secret@db/test')).toEqual([
      '--postgres-url "mysql://root:***@db/test" is not a PostgreSQL URL (it starts with mysql:): use postgres://user:password@host:5432/database',
    ]);
    expect(postgres('postgres:///kcl')).toEqual([
      '--postgres-url "postgres:///kcl" names no host: use postgres://user:password@host:5432/database',
    ]);
    expect(postgres('postgres://kcl:secret@db.internal:5432/kcl')).toEqual([]);
    expect(postgres('postgresql://127.0.0.1/test')).toEqual([]);
    expect(leaseStoreLocationProblems({ kind: 'mysql', url: 'mysql://root@127.0.0.1:3306/test' })).toEqual(
      [],
    );
    expect(leaseStoreLocationProblems({ kind: 'mysql', url: 'root@db' })).toEqual([
      'url "root@db" is not a URL: use mysql://user:password@host:3306/database',
    ]);
  });

  it('checks a DynamoDB endpoint and region, and a URL given whole', () => {
    expect(
      leaseStoreLocationProblems(
        { kind: 'dynamo', endpoint: 'localhost:4567', region: 'EU West' },
        { names: { endpoint: '--dynamo-endpoint', region: '--region' } },
      ),
    ).toEqual([
      '--region "EU West" is not an AWS region: use e.g. eu-west-1',
      '--dynamo-endpoint "localhost:4567" is not an http(s) URL: use e.g. http://localhost:4567 or https://dynamodb.eu-west-1.amazonaws.com',
    ]);
    expect(
      leaseStoreLocationProblems({ kind: 'dynamo', endpoint: 'http://127.0.0.1:4567', region: 'us-east-1' }),
    ).toEqual([]);
    expect(leaseStoreLocationProblems('postgres://db/kcl')).toEqual([]);
    expect(leaseStoreLocationProblems('sqlite:leases.db')).toEqual([]);
    expect(leaseStoreLocationProblems('postgres://')).toEqual([
      'URL "postgres://" names no host: use postgres://user:password@host:5432/database',
    ]);
    expect(leaseStoreLocationProblems('localhost/kcl')[0]).toMatch(/is not a lease store URL/);
  });
});

describe('isLocalEndpoint', () => {
  it('knows an emulator on this machine from a service elsewhere', () => {
    for (const local of [
      'http://localhost:4567',
      'http://127.0.0.1:8000',
      'http://[::1]:8000',
      'http://0.0.0.0:1',
    ]) {
      expect(isLocalEndpoint(local), local).toBe(true);
    }
    for (const remote of [
      'https://vpce-0123.dynamodb.eu-west-1.vpce.amazonaws.com',
      'http://10.0.0.5:8000',
      'http://localhost.example.com',
      'not a url',
    ]) {
      expect(isLocalEndpoint(remote), remote).toBe(false);
    }
  });
});
