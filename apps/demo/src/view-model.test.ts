import { describe, expect, it } from 'vitest';
import type { ShardInfo, ShardRef } from './demo-stream.js';
import type { FleetWorker } from './fleet.js';
import { DemoViewModel, type FleetState, type ViewFrame } from './view-model.js';

const HALF = 2n ** 127n;
const SHARDS: (ShardInfo & ShardRef)[] = [
  {
    shardId: 'shardId-000000000001',
    parentShardIds: [],
    startingHashKey: HALF,
    endingHashKey: 2n * HALF - 1n,
    closed: false,
    streamName: null,
  },
  {
    shardId: 'shardId-000000000000',
    parentShardIds: [],
    startingHashKey: 0n,
    endingHashKey: HALF - 1n,
    closed: false,
    streamName: null,
  },
];

/** A worker holding the leases `leaseKeys` (bare shard ids, or multi-stream keys). */
function worker(
  workerId: string,
  lifecycle: FleetWorker['lifecycle'],
  leaseKeys: readonly string[],
): FleetWorker {
  return {
    workerId,
    outputFile: `${workerId}.jsonl`,
    lifecycle,
    leases: leaseKeys.map((leaseKey) => ({
      leaseKey,
      shardId: leaseKey.slice(leaseKey.lastIndexOf(':') + 1),
      streamIdentifier: leaseKey.includes(':') ? leaseKey.slice(0, leaseKey.lastIndexOf(':')) : null,
      state: 'processing',
      checkpoint: '1',
      millisBehindLatest: 0,
      recordsProcessed: 10,
    })),
    processed: 10,
    samples: [],
    exitCode: null,
    exitSignal: null,
    stderrTail: [],
  };
}

function fleetOf(
  ...workers: FleetWorker[]
): FleetState & { readonly workers: Map<string, FleetWorker>; peakLag: FleetState['peakLag'] } {
  return {
    workers: new Map(workers.map((each) => [each.workerId, each])),
    peakLag: () => 0,
    rate: () => 5,
    distinctProcessed: () => 20,
    processedLines: () => [],
  };
}

const frame = (written: number, shards: ViewFrame['shards'] = SHARDS): ViewFrame => ({
  header: ['kcl demo'],
  elapsedMs: 1_000,
  durationMs: 10_000,
  phase: 'producing',
  next: null,
  written,
  shards,
});

describe('DemoViewModel', () => {
  it('lists shards in shard order with owner, state and range, and says why a shard has no owner', () => {
    const viewModel = new DemoViewModel();
    const fleet = fleetOf(worker('w1', 'running', ['shardId-000000000000', 'shardId-000000000001']));
    expect(viewModel.snapshot(fleet, frame(0), 1_000).shards).toEqual([
      {
        stream: null,
        shard: 'shard-0',
        keys: '0–50%',
        owner: 'w1',
        state: 'processing',
        lagMs: 0,
        parents: [],
      },
      {
        stream: null,
        shard: 'shard-1',
        keys: '50–100%',
        owner: 'w1',
        state: 'processing',
        lagMs: 0,
        parents: [],
      },
    ]);

    fleet.workers.set('w1', worker('w1', 'killed', []));
    viewModel.shardEnded('shardId-000000000001');
    viewModel.noteWorker('w1', 'kill -9 at 00:01');
    const snapshot = viewModel.snapshot(fleet, frame(0), 2_000);
    expect(snapshot.shards.map((row) => [row.shard, row.owner, row.state])).toEqual([
      ['shard-0', null, 'no owner (w1 was killed; waiting for its lease to expire)'],
      ['shard-1', null, 'ended'],
    ]);
    expect(snapshot.workers).toEqual([
      {
        workerId: 'w1',
        state: 'killed',
        leases: [],
        recordsPerSecond: null,
        processed: 10,
        note: 'kill -9 at 00:01',
      },
    ]);
  });

  it('tells the shards of several streams apart by the stream their lease keys name', () => {
    const keyOf = (stream: string, shardId: string): string => `000000000000:${stream}:1700000000:${shardId}`;
    // The same shard ids in two streams, listed stream by stream.
    const shards = [
      ...SHARDS.map((shard) => ({ ...shard, streamName: 'kcl-demo-1' })),
      ...SHARDS.map((shard) => ({ ...shard, streamName: 'kcl-demo-2' })),
    ];
    const viewModel = new DemoViewModel();
    const fleet = fleetOf(
      worker('w1', 'running', [
        keyOf('kcl-demo-1', 'shardId-000000000000'),
        keyOf('kcl-demo-2', 'shardId-000000000001'),
      ]),
      worker('w2', 'running', [keyOf('kcl-demo-2', 'shardId-000000000000')]),
    );
    fleet.peakLag = (leaseKey) => (leaseKey === keyOf('kcl-demo-2', 'shardId-000000000000') ? 2_000 : 0);
    viewModel.shardEnded(keyOf('kcl-demo-1', 'shardId-000000000001'));
    const snapshot = viewModel.snapshot(fleet, frame(0, shards), 1_000);
    expect(snapshot.shards.map((row) => [row.stream, row.shard, row.owner, row.state, row.lagMs])).toEqual([
      ['demo-1', 'shard-0', 'w1', 'processing', 0],
      ['demo-1', 'shard-1', null, 'ended', null],
      ['demo-2', 'shard-0', 'w2', 'processing', 2_000],
      ['demo-2', 'shard-1', 'w1', 'processing', 0],
    ]);
    expect(snapshot.workers.map((row) => row.leases)).toEqual([
      ['demo-1/shard-0', 'demo-2/shard-1'],
      ['demo-2/shard-0'],
    ]);
  });

  it('measures the write rate over the samples of the last 3 s', () => {
    const viewModel = new DemoViewModel();
    const fleet = fleetOf();
    expect(viewModel.snapshot(fleet, frame(0), 1_000).writeRate).toBe(0);
    expect(viewModel.snapshot(fleet, frame(200), 2_000).writeRate).toBe(200);
    expect(viewModel.snapshot(fleet, frame(600), 3_000).writeRate).toBe(300);
    // The first sample is now more than 3 s old: the rate counts from the one taken at 2 s.
    expect(viewModel.snapshot(fleet, frame(1_000), 5_000).writeRate).toBeCloseTo(266.7, 1);
  });

  it('keeps the latest 200 events', () => {
    const viewModel = new DemoViewModel();
    for (let index = 0; index < 250; index++)
      viewModel.addEvent({ time: 'startup', kind: 'script', text: `event ${index}` });
    const { events } = viewModel.snapshot(fleetOf(), frame(0), 1_000);
    expect(events).toHaveLength(200);
    expect(events[0]?.text).toBe('event 50');
  });
});
