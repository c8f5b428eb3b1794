import { toJson } from '../cli/cli-io.js';
import type { CommandContext } from '../cli/command-context.js';
import { say } from '../cli/command-context.js';
import type { ExitCode } from '../cli/exit-codes.js';
import { EXIT_CODES } from '../cli/exit-codes.js';
import { OperationRefusedError } from '../cli/operation-refused-error.js';
import { type ReleaseOutcome, releaseLeaseOf } from '../operations/reset-leases.js';
import { readApplicationStatus } from '../status/read-application-status.js';
import { confirm } from './confirm.js';

/**
 * `kcl release --worker`: hands a dead or stuck worker's leases back at once instead of after their
 * expiry, and removes a dead worker from the registry.
 */
export async function runRelease(context: CommandContext): Promise<ExitCode> {
  const { raw, json, io, store } = context;
  const workerId = raw.worker as string;
  const status = await readApplicationStatus(store, {
    workerExpiryMs: raw.workerExpiryMs as number | undefined,
    now: context.now,
  });
  const worker = status.workers.find((entry) => entry.workerId === workerId);
  const leases = status.shards.filter((shard) => shard.owner === workerId).map((shard) => shard.leaseKey);
  // A worker not in the registry that holds leases may be one that does not register (a Java KCL
  // worker): nothing says it is gone, so it counts as live.
  const alive = worker === undefined ? status.unregisteredOwners.includes(workerId) : worker.alive;
  const dryRun = raw.dryRun === true;
  if (!json) {
    say(
      context,
      `${workerId}: ${worker === undefined ? `not in the worker registry${alive ? ' (taken as live: a worker that does not register, such as a Java KCL worker, holds leases under this id)' : ''}` : alive ? 'alive (recent heartbeat)' : 'gone (old heartbeat)'}, holds ${leases.length} lease(s)${leases.length === 0 ? '' : `: ${leases.join(', ')}`}${dryRun ? ' (dry run: nothing is written)' : ''}`,
    );
  }
  if (dryRun) {
    if (json) io.stdout.write(`${toJson({ command: 'release', dryRun: true, workerId, alive, leases })}\n`);
    return EXIT_CODES.ok;
  }
  if (alive && raw.force !== true) {
    throw new OperationRefusedError('kcl release', [
      worker === undefined
        ? `${workerId} holds leases but is not in the worker registry, so nothing says it is gone (a Java KCL worker does not register): stop it first, or pass --force if it is gone or stuck`
        : `${workerId} is alive (its last heartbeat is ${Math.round(worker.heartbeatAgeMs / 1_000)} s old, under its expiry of ${Math.round(worker.expiryMs / 1_000)} s): it would take leases again. Stop it first, or pass --force if it is stuck: it then finds its leases gone at its next renewal`,
    ]);
  }
  if (leases.length > 0) {
    await confirm(context, 'kcl release', `Release ${leases.length} lease(s) of ${workerId}?`);
  }
  const outcomes: ReleaseOutcome[] = [];
  for (const leaseKey of leases) {
    if (context.signal.aborted) break;
    outcomes.push(await releaseLeaseOf(store, leaseKey, workerId));
    context.progress.update('release', outcomes.length, leases.length);
  }
  context.progress.finish();
  const removed = worker !== undefined && !alive;
  if (removed) await store.workers.remove(workerId);
  if (json) {
    io.stdout.write(
      `${toJson({ command: 'release', dryRun: false, workerId, alive, outcomes, removedFromRegistry: removed })}\n`,
    );
  } else {
    const released = outcomes.filter((outcome) => outcome.result === 'released').length;
    say(
      context,
      `Released ${released} lease(s) of ${workerId}${removed ? '; removed it from the worker registry' : ''}.`,
    );
    for (const outcome of outcomes) {
      if (outcome.result === 'moved')
        say(context, `  ${outcome.leaseKey}: already moved to ${outcome.owner ?? 'nobody'}`);
    }
  }
  return context.signal.aborted ? EXIT_CODES.interrupted : EXIT_CODES.ok;
}
