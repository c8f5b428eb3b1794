import { caseGroup } from '../conformance-case.js';

/** The worker registry: heartbeats, listing, removal. */
export const workerCases = caseGroup('workers', {
  'a heartbeat registers the worker and increments on every beat': async ({ store, assert }) => {
    const first = await store.workers.heartbeat('worker-a', { host: 'h1', pid: '42' });
    assert.equal([first.workerId, first.heartbeat], ['worker-a', 1]);
    assert.equal(first.metadata, { host: 'h1', pid: '42' });
    assert.ok(
      first.lastHeartbeatAt instanceof Date && !Number.isNaN(first.lastHeartbeatAt.getTime()),
      'a date',
    );
    const second = await store.workers.heartbeat('worker-a', { host: 'h1', pid: '42' });
    assert.equal(second.heartbeat, 2);
    const listed = await store.workers.list();
    assert.equal(
      listed.map((worker) => [worker.workerId, worker.heartbeat, worker.metadata]),
      [['worker-a', 2, { host: 'h1', pid: '42' }]],
    );
  },
  'concurrent heartbeats of one worker each count': async ({ store, assert }) => {
    await Promise.all(Array.from({ length: 10 }, () => store.workers.heartbeat('worker-a')));
    const [worker] = await store.workers.list();
    assert.equal(worker?.heartbeat, 10);
  },
  'workers are listed by id and removed': async ({ store, assert }) => {
    for (const workerId of ['w-3', 'w-1', 'w-2']) await store.workers.heartbeat(workerId);
    assert.equal(
      (await store.workers.list()).map((worker) => worker.workerId),
      ['w-1', 'w-2', 'w-3'],
    );
    await store.workers.remove('w-2');
    await store.workers.remove('w-404');
    assert.equal(
      (await store.workers.list()).map((worker) => worker.workerId),
      ['w-1', 'w-3'],
    );
    const back = await store.workers.heartbeat('w-2');
    assert.equal(back.heartbeat, 1, 'a removed worker starts again at 1');
  },
  'a listing without metadata leaves the metadata out and keeps the rest': async ({ store, assert }) => {
    await store.workers.heartbeat('worker-a', { leaseFigures: 'x'.repeat(4_000), startedAt: 's' });
    await store.workers.heartbeat('worker-b');
    await store.workers.heartbeat('worker-a');
    const full = await store.workers.list();
    const bare = await store.workers.list({ metadata: false });
    assert.equal(
      bare.map((worker) => [
        worker.workerId,
        worker.heartbeat,
        worker.lastHeartbeatAt.getTime(),
        worker.metadata,
      ]),
      full.map((worker) => [worker.workerId, worker.heartbeat, worker.lastHeartbeatAt.getTime(), {}]),
    );
    assert.equal(
      full[0]?.metadata,
      { leaseFigures: 'x'.repeat(4_000), startedAt: 's' },
      'the default still reads it',
    );
  },
  'an empty registry lists no workers': async ({ store, assert }) => {
    assert.equal(await store.workers.list(), []);
  },
});
