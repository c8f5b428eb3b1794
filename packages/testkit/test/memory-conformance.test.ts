import { describe, expect, it } from 'vitest';
import { conformanceCases, describeLeaseStoreConformance } from '../src/conformance/index.js';
import type { MemoryTransaction } from '../src/index.js';
import { createMemoryLeaseStore, MemoryLeaseTable } from '../src/index.js';

const table = new MemoryLeaseTable();

describeLeaseStoreConformance({
  name: 'memory',
  setup: async () => ({
    createStore: (applicationName) => createMemoryLeaseStore({ applicationName, table }),
    readRawLease: async (applicationName, leaseKey) => {
      const lease = table.rawLeases(applicationName).find((candidate) => candidate.leaseKey === leaseKey);
      return lease === undefined ? null : { ...lease };
    },
  }),
});

const sessionTable = new MemoryLeaseTable();
/** The application table the transaction cases write, committed rows per application. */
const committedRows = new Map<string, string[]>();

describeLeaseStoreConformance({
  name: 'memory with sessions and transactions',
  setup: async () => ({
    createStore: (applicationName) =>
      createMemoryLeaseStore({ applicationName, table: sessionTable, sessions: true, transactions: true }),
    transactions: {
      async write(transaction, applicationName, key) {
        (transaction as MemoryTransaction).onCommit(() => {
          committedRows.set(applicationName, [...(committedRows.get(applicationName) ?? []), key].sort());
        });
      },
      read: async (applicationName) => committedRows.get(applicationName) ?? [],
      concurrentWriters: true,
    },
    sessions: {
      killSession: async (applicationName, workerId) => {
        if (!sessionTable.dropWorkerSession(applicationName, workerId)) {
          throw new Error(`worker ${workerId} of ${applicationName} has no session to end`);
        }
      },
    },
  }),
});

describe('the conformance suite', () => {
  it('has at least 40 cases, with unique names', () => {
    expect(conformanceCases.length).toBeGreaterThanOrEqual(40);
    const names = conformanceCases.map((testCase) => `${testCase.group}/${testCase.name}`);
    expect(new Set(names).size).toBe(names.length);
  });
});
