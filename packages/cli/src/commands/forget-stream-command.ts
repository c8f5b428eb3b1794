import type { Lease } from '@kcl/core';
import { streamIdentifierOfLeaseKey } from '@kcl/shard-graph';
import { toJson } from '../cli/cli-io.js';
import type { CommandContext } from '../cli/command-context.js';
import { say } from '../cli/command-context.js';
import type { ExitCode } from '../cli/exit-codes.js';
import { EXIT_CODES } from '../cli/exit-codes.js';
import { OperationRefusedError } from '../cli/operation-refused-error.js';
import { readApplicationStatus } from '../status/read-application-status.js';
import { confirm } from './confirm.js';
import { liveWorkers } from './live-workers.js';

/**
 * Whether a lease belongs to `stream`: its stream identifier (`account:stream:creationEpoch`) is
 * `stream`, or its name part is.
 */
export function leaseOfStream(lease: Lease, stream: string): boolean {
  const identifier = lease.streamIdentifier ?? streamIdentifierOfLeaseKey(lease.leaseKey) ?? null;
  if (identifier === null) return false;
  if (identifier === stream) return true;
  const parts = identifier.split(':');
  return parts.length >= 3 && parts[parts.length - 2] === stream;
}

/**
 * `kcl forget-stream`: deletes the leases of one stream of a multi-stream application (a stream that
 * was deleted, or that the application no longer reads).
 */
export async function runForgetStream(context: CommandContext): Promise<ExitCode> {
  const { raw, json, io, store } = context;
  const stream = raw.stream as string;
  const scan = await store.admin.scan();
  const status = await readApplicationStatus(store, {
    workerExpiryMs: raw.workerExpiryMs as number | undefined,
    now: context.now,
  });
  const alive = new Set(liveWorkers(status));
  const leases = scan.leases.filter((lease) => leaseOfStream(lease, stream));
  const held = leases.filter((lease) => lease.owner !== null && alive.has(lease.owner));
  const dryRun = raw.dryRun === true;
  if (!json) {
    say(
      context,
      `Stream ${stream}: ${leases.length} lease(s)${leases.length === 0 ? '' : `: ${leases.map((lease) => lease.leaseKey).join(', ')}`}${dryRun ? ' (dry run: nothing is deleted)' : ''}`,
    );
  }
  if (leases.length === 0 && !dryRun) {
    throw new OperationRefusedError('kcl forget-stream', [
      `no lease belongs to stream ${JSON.stringify(stream)}: give its name or its identifier (account:stream:creationEpoch) as kcl status shows them`,
    ]);
  }
  if (dryRun) {
    if (json) {
      io.stdout.write(
        `${toJson({ command: 'forget-stream', dryRun: true, stream, leases: leases.map((lease) => lease.leaseKey), heldByLiveWorkers: held.map((lease) => lease.leaseKey) })}\n`,
      );
    }
    return EXIT_CODES.ok;
  }
  if (held.length > 0 && raw.force !== true) {
    throw new OperationRefusedError('kcl forget-stream', [
      `live workers hold leases of this stream (${held.map((lease) => `${lease.leaseKey} by ${lease.owner}`).join(', ')}): remove the stream from the application's stream list and wait until they let go, or pass --force (workers that still read it create its leases again)`,
    ]);
  }
  await confirm(context, 'kcl forget-stream', `Delete ${leases.length} lease(s) of stream ${stream}?`);
  let done = 0;
  for (const lease of leases) {
    if (context.signal.aborted) break;
    await store.leases.delete(lease.leaseKey);
    done += 1;
    context.progress.update('forget-stream', done, leases.length);
  }
  context.progress.finish();
  if (json) {
    io.stdout.write(
      `${toJson({ command: 'forget-stream', dryRun: false, stream, deleted: leases.slice(0, done).map((lease) => lease.leaseKey) })}\n`,
    );
  } else {
    say(context, `Deleted ${done} lease(s) of stream ${stream}.`);
  }
  return context.signal.aborted ? EXIT_CODES.interrupted : EXIT_CODES.ok;
}
