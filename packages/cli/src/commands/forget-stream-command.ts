import type { Lease } from '@kcl/core';
import { ConfigurationError } from '@kcl/core';
import { streamIdentifierOfLeaseKey } from '@kcl/shard-graph';
import { toJson } from '../cli/cli-io.js';
import type { CommandContext } from '../cli/command-context.js';
import { say } from '../cli/command-context.js';
import type { ExitCode } from '../cli/exit-codes.js';
import { EXIT_CODES } from '../cli/exit-codes.js';
import { OperationRefusedError } from '../cli/operation-refused-error.js';
import { readApplicationStatus } from '../status/read-application-status.js';
import { checkStreamPresence, type StreamPresence } from '../status/stream-presence.js';
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

/** Why forgetting the stream's leases is refused after asking Kinesis; null when the stream is gone. */
function stillThereProblem(presence: StreamPresence): string | null {
  if (presence.presence === 'exists') return `stream ${presence.stream} still exists`;
  if (presence.presence === 'unknown') {
    return `Kinesis could not say whether stream ${presence.stream} still exists (${presence.problem})`;
  }
  return null;
}

function streamOf(lease: Lease): string | null {
  return lease.streamIdentifier ?? streamIdentifierOfLeaseKey(lease.leaseKey) ?? null;
}

/**
 * `kcl forget-stream`: deletes the leases of one stream of a multi-stream application (a stream that
 * was deleted, or that the application no longer reads). A name must name one stream identifier (a
 * stream deleted and created again has two); with Kinesis access it refuses while the stream exists.
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
  const identifiers = [...new Set(leases.flatMap((lease) => streamOf(lease) ?? []))].sort();
  if (identifiers.length > 1) {
    throw new ConfigurationError('kcl forget-stream', [
      `--stream ${JSON.stringify(stream)} names ${identifiers.length} streams (${identifiers.join(', ')}): a stream deleted and created again keeps its name, so give the identifier of the one to forget`,
    ]);
  }
  const held = leases.filter((lease) => lease.owner !== null && alive.has(lease.owner));
  const dryRun = raw.dryRun === true;
  const presence =
    context.kinesis === undefined || identifiers.length === 0
      ? null
      : ((await checkStreamPresence(context.kinesis, identifiers))[0] ?? null);
  const stillThere = presence === null ? null : stillThereProblem(presence);
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
        `${toJson({ command: 'forget-stream', dryRun: true, stream, leases: leases.map((lease) => lease.leaseKey), heldByLiveWorkers: held.map((lease) => lease.leaseKey), ...(presence === null ? {} : { presence: presence.presence }) })}\n`,
      );
    } else if (stillThere !== null) {
      say(context, `Without --force this would be refused: ${stillThere}.`);
    }
    return EXIT_CODES.ok;
  }
  const refusals: string[] = [];
  if (held.length > 0) {
    // Running workers never create the leases of a stream they saw leases of again, so the stream
    // would go unread until they restart (and then start over at their initial position).
    refusals.push(
      `live workers hold leases of this stream (${held.map((lease) => `${lease.leaseKey} by ${lease.owner}`).join(', ')}): deleted, its leases are not created again by running workers, which saw them (the stream goes unread until they restart, and a restarted worker whose stream list still names it starts it over at its initial position). Remove the stream from the application's stream list and wait until they let go, or pass --force`,
    );
  }
  if (stillThere !== null) {
    refusals.push(
      `${stillThere}: its leases hold how far it was read, and forgetting them makes a worker that reads it start over at its initial position. Forget the leases of deleted streams only, or pass --force`,
    );
  }
  if (refusals.length > 0 && raw.force !== true)
    throw new OperationRefusedError('kcl forget-stream', refusals);
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
