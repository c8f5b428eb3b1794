import { checkpointCases } from './cases/checkpoint-cases.js';
import { createCases } from './cases/create-cases.js';
import { deleteCases } from './cases/delete-cases.js';
import { handoffCases } from './cases/handoff-cases.js';
import { keyCases } from './cases/key-cases.js';
import { markerCases } from './cases/marker-cases.js';
import { metaCases } from './cases/meta-cases.js';
import { rawCases } from './cases/raw-cases.js';
import { readCases } from './cases/read-cases.js';
import { releaseCases } from './cases/release-cases.js';
import { renewCases } from './cases/renew-cases.js';
import { schemaCases } from './cases/schema-cases.js';
import { sessionCases } from './cases/session-cases.js';
import { sharingCases } from './cases/sharing-cases.js';
import { takeCases } from './cases/take-cases.js';
import { transactionCases } from './cases/transaction-cases.js';
import { v2Cases } from './cases/v2-cases.js';
import { workerCases } from './cases/worker-cases.js';
import type { ConformanceCase } from './conformance-case.js';

/** Every case of the conformance suite, group by group, in a stable order. */
export const conformanceCases: readonly ConformanceCase[] = [
  ...schemaCases,
  ...createCases,
  ...readCases,
  ...renewCases,
  ...takeCases,
  ...releaseCases,
  ...checkpointCases,
  ...metaCases,
  ...deleteCases,
  ...v2Cases,
  ...handoffCases,
  ...workerCases,
  ...sessionCases,
  ...transactionCases,
  ...markerCases,
  ...sharingCases,
  ...keyCases,
  ...rawCases,
];
