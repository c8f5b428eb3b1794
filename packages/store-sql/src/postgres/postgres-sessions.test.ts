import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { sqlLeaseTableNames } from '../sql-table-names.js';
import { postgresSessionKeys } from './postgres-sessions.js';

const first32 = (text: string) => createHash('sha256').update(text, 'utf8').digest().readUInt32BE(0);

describe('postgresSessionKeys', () => {
  it('takes the first 32 bits of SHA-256 of the table and application, and of the worker id', () => {
    const keys = postgresSessionKeys(
      { tables: sqlLeaseTableNames('kcl_leases'), applicationName: 'billing' },
      'w-1',
    );
    expect(keys).toEqual({ classId: first32('kcl_leases\u0000billing'), objectId: first32('w-1') });
    expect(Number.isInteger(keys.classId) && keys.classId >= 0 && keys.classId < 2 ** 32).toBe(true);
  });

  it('gives each application of a table, and each table, its own key', () => {
    const classIds = [
      ['kcl_leases', 'billing'],
      ['kcl_leases', 'billing2'],
      ['other_leases', 'billing'],
    ].map(
      ([table, application]) =>
        postgresSessionKeys(
          { tables: sqlLeaseTableNames(table as string), applicationName: application as string },
          'w',
        ).classId,
    );
    expect(new Set(classIds).size).toBe(3);
  });
});
