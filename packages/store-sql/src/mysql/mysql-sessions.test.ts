import { describe, expect, it } from 'vitest';
import { sqlLeaseTableNames } from '../sql-table-names.js';
import { mysqlSessionLockName } from './mysql-sessions.js';

const scope = (applicationName: string, tableName = 'kcl_leases') => ({
  tables: sqlLeaseTableNames(tableName),
  applicationName,
});

describe('mysqlSessionLockName', () => {
  it('names the database, table, application and worker when that fits in 64 characters', () => {
    expect(mysqlSessionLockName('prod', scope('billing'), 'host-1:4242:9f3a')).toBe(
      'kcl:prod.kcl_leases:billing:host-1:4242:9f3a',
    );
  });

  it('hashes what does not fit, or what MySQL and MariaDB would compare differently', () => {
    const hashed = [
      mysqlSessionLockName('prod', scope('billing'), 'w'.repeat(60)),
      mysqlSessionLockName('prod', scope('billing'), 'Host-1'),
      mysqlSessionLockName('prod', scope('billing'), 'hôte'),
      mysqlSessionLockName('prod', scope('billing'), 'two words'),
      mysqlSessionLockName('prod', scope('bill:ing'), 'w'),
      mysqlSessionLockName('pr:od', scope('billing'), 'w'),
    ];
    for (const name of hashed) expect(name).toMatch(/^kcl#[0-9a-f]{60}$/);
    expect(new Set(hashed).size).toBe(hashed.length);
  });

  it('keeps apart what a plain join would confuse', () => {
    const names = [
      mysqlSessionLockName('prod', scope('a'), 'b:c'),
      mysqlSessionLockName('prod', scope('a:b'), 'c'),
      mysqlSessionLockName('prod', scope('a', 'other'), 'b:c'),
      mysqlSessionLockName('test', scope('a'), 'b:c'),
      mysqlSessionLockName('prod', scope('a'), 'B:c'),
    ];
    expect(new Set(names).size).toBe(names.length);
    expect(names.every((name) => [...name].length <= 64)).toBe(true);
  });
});
