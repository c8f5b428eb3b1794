import { ConfigurationError, KclError, LeaseStoreError } from './errors.js';
import type {
  LeaseRepository,
  LeaseStore,
  LeaseStoreAdministration,
  StoreCallOptions,
  TransactionalCheckpointWork,
  WorkerRegistry,
  WorkerSession,
} from './lease-store.js';
import { untilAborted } from './until-aborted.js';

const GUARDED = Symbol.for('@kcl/core/guarded-lease-store');

/**
 * A call of the contract, named `role.method` (`'leases.renewMany'`, `'workers.heartbeat'`, …); the
 * calls of a `WorkerSession` are `session.check` and `session.close`.
 */
export type LeaseStoreOperation =
  | `leases.${keyof LeaseRepository}`
  | `workers.${keyof WorkerRegistry}`
  | `admin.${keyof LeaseStoreAdministration}`
  | `session.${Exclude<keyof WorkerSession, 'workerId'>}`;

/** The calls only a store with `capabilities.sessionLiveness` has. */
export type SessionLivenessOperation =
  | 'workers.attachSession'
  | 'workers.liveSessions'
  | 'session.check'
  | 'session.close';

/** The call only a store with `capabilities.transactionalCheckpoint` has. */
export type TransactionalCheckpointOperation = 'leases.checkpointInTransaction';

/** Every call every store has, as `role.method`, with how many arguments come before its options. */
const CALLS = {
  'leases.list': 0,
  'leases.get': 1,
  'leases.create': 1,
  'leases.renew': 2,
  'leases.renewMany': 1,
  'leases.take': 3,
  'leases.release': 2,
  'leases.requestHandoff': 3,
  'leases.completeHandoff': 2,
  'leases.checkpoint': 3,
  'leases.updateMeta': 2,
  'leases.delete': 1,
  'workers.heartbeat': 2,
  'workers.list': 0,
  'workers.remove': 1,
  'admin.ensureSchema': 0,
  'admin.getMigrationMarker': 0,
  'admin.setMigrationMarker': 1,
  'admin.scan': 0,
} as const satisfies Record<
  Exclude<LeaseStoreOperation, SessionLivenessOperation | TransactionalCheckpointOperation>,
  number
>;

/** Every call every store has, in the order of the roles (the session calls are not among them). */
export const LEASE_STORE_OPERATIONS = Object.keys(CALLS) as readonly LeaseStoreOperation[];

/** The calls of session liveness, present exactly when a store declares `capabilities.sessionLiveness`. */
export const SESSION_LIVENESS_OPERATIONS: readonly SessionLivenessOperation[] = [
  'workers.attachSession',
  'workers.liveSessions',
  'session.check',
  'session.close',
];

/** Whether `store` declares session liveness and has its calls. */
function offersSessions(store: LeaseStore): boolean {
  const workers = store.workers as Partial<WorkerRegistry> | undefined;
  return (
    store.capabilities?.sessionLiveness === true &&
    typeof workers?.attachSession === 'function' &&
    typeof workers.liveSessions === 'function'
  );
}

/** Whether `store` declares transactional checkpoints and has the call. */
export function offersTransactionalCheckpoint(store: LeaseStore): boolean {
  const leases = store.leases as Partial<LeaseRepository> | undefined;
  return (
    store.capabilities?.transactionalCheckpoint === true &&
    typeof leases?.checkpointInTransaction === 'function'
  );
}

/**
 * Decides what happens to one call of a wrapped store: `call` runs the inner store's method with the
 * options given (the caller's, or others, e.g. with a deadline's signal).
 */
export type LeaseStoreInterceptor = (
  operation: LeaseStoreOperation,
  options: StoreCallOptions | undefined,
  call: (options: StoreCallOptions | undefined) => Promise<unknown>,
) => Promise<unknown>;

/**
 * A store whose every call goes through `intercept` (fault injection, deadlines, guards, recording),
 * built once here so wrappers do not each list the contract's calls. The identity fields pass through;
 * `close` runs `close` of `overrides`, else the inner store's. A store with session liveness keeps it:
 * `workers.attachSession` and `workers.liveSessions` go through `intercept`, and so do the `check` and
 * `close` of every session attached through the wrapper (`session.check`, `session.close`). A store
 * without it (or declaring it without the calls) comes out with `capabilities.sessionLiveness` false.
 * Likewise `leases.checkpointInTransaction` goes through `intercept` on a store declaring
 * `capabilities.transactionalCheckpoint`; a store without it comes out with the capability false.
 */
export function interceptLeaseStore(
  store: LeaseStore,
  intercept: LeaseStoreInterceptor,
  overrides: { readonly description?: string; readonly close?: () => Promise<void> } = {},
): LeaseStore {
  const roles: Record<string, Record<string, unknown>> = { leases: {}, workers: {}, admin: {} };
  for (const operation of LEASE_STORE_OPERATIONS) {
    const [role, method] = operation.split('.') as [keyof typeof roles, string];
    const arity = CALLS[operation as keyof typeof CALLS];
    const target = (
      store as unknown as Record<string, Record<string, (...args: unknown[]) => Promise<unknown>>>
    )[role];
    (roles[role] as Record<string, unknown>)[method] = (...args: unknown[]) => {
      const given = args[arity] as StoreCallOptions | undefined;
      return intercept(operation, given, (options) => {
        const forwarded = args.slice(0, arity);
        while (forwarded.length < arity) forwarded.push(undefined);
        if (options !== undefined) forwarded.push(options);
        const method = target?.[operation.split('.')[1] as string];
        if (typeof method !== 'function') {
          return Promise.reject(new Error(`${store.description}: ${operation} is not a function`));
        }
        return method.apply(target, forwarded);
      });
    };
  }
  const sessions = offersSessions(store);
  if (sessions) {
    const workers = store.workers as Required<WorkerRegistry>;
    Object.assign(roles.workers as Record<string, unknown>, {
      attachSession: (workerId: string, given?: StoreCallOptions) =>
        intercept('workers.attachSession', given, (options) =>
          (options === undefined
            ? workers.attachSession(workerId)
            : workers.attachSession(workerId, options)
          ).then((session) => interceptSession(session, intercept)),
        ),
      liveSessions: (workerIds: readonly string[], given?: StoreCallOptions) =>
        intercept('workers.liveSessions', given, (options) =>
          options === undefined ? workers.liveSessions(workerIds) : workers.liveSessions(workerIds, options),
        ),
    });
  }
  const transactions = offersTransactionalCheckpoint(store);
  if (transactions) {
    const leases = store.leases as Required<LeaseRepository>;
    (roles.leases as Record<string, unknown>).checkpointInTransaction = <T>(
      leaseKey: string,
      leaseCounter: number,
      work: TransactionalCheckpointWork<T>,
      given?: StoreCallOptions,
    ) =>
      intercept('leases.checkpointInTransaction', given, (options) =>
        options === undefined
          ? leases.checkpointInTransaction(leaseKey, leaseCounter, work)
          : leases.checkpointInTransaction(leaseKey, leaseCounter, work, options),
      );
  }
  return {
    specificationVersion: store.specificationVersion,
    applicationName: store.applicationName,
    capabilities: {
      ...store.capabilities,
      sessionLiveness: sessions,
      transactionalCheckpoint: transactions,
    },
    description: overrides.description ?? store.description,
    leases: roles.leases as unknown as LeaseRepository,
    workers: roles.workers as unknown as WorkerRegistry,
    admin: roles.admin as unknown as LeaseStoreAdministration,
    close: overrides.close ?? (() => store.close()),
  };
}

/** A session whose `check` and `close` go through `intercept`. */
function interceptSession(session: WorkerSession, intercept: LeaseStoreInterceptor): WorkerSession {
  return {
    workerId: session.workerId,
    check: (given?: StoreCallOptions) =>
      intercept('session.check', given, (options) =>
        options === undefined ? session.check() : session.check(options),
      ) as Promise<boolean>,
    close: () => intercept('session.close', undefined, () => session.close()) as Promise<void>,
  };
}

/** The error a call aborted by its signal rejects with (unless the signal's reason is one already). */
export class StoreCallAbortedError extends KclError {
  constructor(operation: string, store: string, reason?: unknown) {
    super(
      'LEASE_STORE_CALL_ABORTED',
      `@kcl/core: ${operation} on ${store} was aborted before it answered${reason instanceof Error ? ` (${reason.message})` : ''}`,
      { retryable: true, ...(reason === undefined ? {} : { cause: reason }) },
    );
  }

  static override is(value: unknown): value is StoreCallAbortedError {
    return KclError.isClass(value, 'StoreCallAbortedError');
  }
}

/**
 * The one wrapper every caller puts around a `LeaseStore` it is given (as Kysely's runtime driver wraps
 * a dialect's driver), so no caller repeats these rules:
 * - the contract version is checked once, with an error that says what to do;
 * - a rejection that is not a kcl error becomes a `LeaseStoreError` naming the call and the store
 *   (the original as its `cause`), so callers only ever see kcl errors;
 * - a call whose `signal` aborts rejects at once, even from a store that cannot cancel it;
 * - `close()` runs once.
 * Wrapping a guarded store again returns it unchanged.
 */
export function guardLeaseStore(store: LeaseStore, component: string): LeaseStore {
  if ((store as unknown as Record<symbol, unknown>)[GUARDED] === true) return store;
  const given = store as Partial<LeaseStore> | null | undefined;
  if (given === null || given === undefined || typeof given !== 'object') {
    throw new ConfigurationError(component, [
      'leaseStore must be a LeaseStore, e.g. createSqlLeaseStore(…), createDynamoLeaseStore(…) or openLeaseStore(url)',
    ]);
  }
  if (given.specificationVersion !== 'v2') {
    throw new ConfigurationError(component, [
      `leaseStore implements the LeaseStore specification ${JSON.stringify(given.specificationVersion)}; this version of kcl needs v2: upgrade the store package to the same kcl release`,
    ]);
  }
  const missing = LEASE_STORE_OPERATIONS.filter((operation) => {
    const [role, method] = operation.split('.') as [string, string];
    const target = (store as unknown as Record<string, Record<string, unknown> | undefined>)[role];
    return typeof target?.[method] !== 'function';
  });
  if (missing.length > 0) {
    throw new ConfigurationError(component, [
      `leaseStore ${store.description ?? '(no description)'} lacks ${missing.join(', ')}: it does not implement the LeaseStore v2 contract`,
    ]);
  }
  if (given.capabilities?.sessionLiveness === true && !offersSessions(store)) {
    throw new ConfigurationError(component, [
      `leaseStore ${store.description ?? '(no description)'} declares capabilities.sessionLiveness but lacks workers.attachSession or workers.liveSessions`,
    ]);
  }
  if (given.capabilities?.transactionalCheckpoint === true && !offersTransactionalCheckpoint(store)) {
    throw new ConfigurationError(component, [
      `leaseStore ${store.description ?? '(no description)'} declares capabilities.transactionalCheckpoint but lacks leases.checkpointInTransaction`,
    ]);
  }
  let closing: Promise<void> | null = null;
  const guarded = interceptLeaseStore(
    store,
    (operation, options, call) =>
      guardCall(() => call(options), options?.signal, operation, store.description, component),
    {
      close() {
        closing ??= guardCall(
          () => store.close(),
          undefined,
          'close',
          store.description,
          component,
        ) as Promise<void>;
        return closing;
      },
    },
  );
  Object.defineProperty(guarded, GUARDED, { value: true, enumerable: false });
  return guarded;
}

function guardCall(
  call: () => Promise<unknown>,
  signal: AbortSignal | undefined,
  operation: string,
  description: string,
  component: string,
): Promise<unknown> {
  if (signal?.aborted === true) return Promise.reject(aborted(signal, operation, description));
  let pending: Promise<unknown>;
  try {
    pending = Promise.resolve(call());
  } catch (error) {
    pending = Promise.reject(error);
  }
  const translated = pending.catch((error: unknown) => {
    throw KclError.is(error) ? error : unknownFailure(error, operation, description, component);
  });
  if (signal === undefined) return translated;
  return untilAborted(translated, signal, () => aborted(signal, operation, description));
}

function aborted(signal: AbortSignal, operation: string, description: string): KclError {
  return KclError.is(signal.reason)
    ? signal.reason
    : new StoreCallAbortedError(operation, description, signal.reason);
}

function unknownFailure(
  error: unknown,
  operation: string,
  description: string,
  component: string,
): LeaseStoreError {
  const detail = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
  return new LeaseStoreError(description, `${component}: ${operation} on ${description} failed: ${detail}`, {
    cause: error,
  });
}
