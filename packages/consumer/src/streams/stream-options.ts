import type { OptionProblems } from '@kcl/core';
import { closestName } from '@kcl/core';
import type { StreamIdentity } from '../kinesis/kinesis-stream.js';

/** Where a new application starts reading each shard. */
export type InitialPosition = 'TRIM_HORIZON' | 'LATEST' | { readonly timestamp: Date };

/**
 * One stream of a multi-stream application: a stream name or ARN, or an object naming one with the
 * position its shards start at when the stream has no leases yet (default: the consumer's
 * `initialPosition`).
 */
export type StreamConfig =
  | string
  | { readonly streamName: string; readonly initialPosition?: InitialPosition }
  | { readonly streamArn: string; readonly initialPosition?: InitialPosition };

/**
 * The streams of a multi-stream application, asked at the start and again every
 * `streamSyncIntervalMs`: a stream that appears is read from its initial position, one that is gone
 * from the answer is a former stream (see `formerStreams`). A call that throws keeps the last answer.
 */
export interface StreamTracker {
  streams(): readonly StreamConfig[] | Promise<readonly StreamConfig[]>;
}

/**
 * What happens to the leases of a stream the application no longer names (the Java KCL's
 * `FormerStreamsLeasesDeletionStrategy`). Until they are deleted its shards keep being read, so
 * nothing written before the removal is dropped.
 * - `none`: never deleted; the stream is read on.
 * - `auto`: deleted `waitMs` after this worker noticed the stream gone from the list (or found its
 *   leases in the table without it being listed).
 * - `provided`: deleted `waitMs` after `streams()` (names, ARNs or stream identifiers) first named a
 *   stream that is not listed any more.
 * A stream that no longer exists in Kinesis (deleted, or re-created: its creation time changed) has
 * nothing left to read; its leases are deleted at the next stream sync whatever the strategy.
 */
export type FormerStreamsStrategy =
  | { readonly strategy: 'none' }
  | { readonly strategy: 'auto'; readonly waitMs: number }
  | {
      readonly strategy: 'provided';
      readonly waitMs: number;
      streams(): readonly string[] | Promise<readonly string[]>;
    };

/** A stream as the consumer reads it: its name and, in a multi-stream application, its identifier. */
export interface ConsumedStream {
  readonly name: string;
  /** `account:streamName:creationEpochSeconds` in a multi-stream application; null when one stream is read. */
  readonly identifier: string | null;
}

/** A stream config checked: how to address it, where its new shards start. */
export interface ResolvedStreamConfig {
  readonly identity: StreamIdentity;
  readonly initialPosition: InitialPosition;
}

/** The multi-stream settings, checked. */
export interface ResolvedMultiStream {
  /** The streams listed now (a fixed list, or the tracker's answer, checked). */
  readonly list: () => Promise<readonly ResolvedStreamConfig[]>;
  readonly syncIntervalMs: number;
  readonly formerStreams: FormerStreamsStrategy;
}

export const MULTI_STREAM_DEFAULTS = {
  streamSyncIntervalMs: 60_000,
  formerStreams: { strategy: 'auto', waitMs: 3_600_000 } as FormerStreamsStrategy,
} as const;

export const STREAM_ARN = /^arn:aws[a-z-]*:kinesis:[a-z0-9-]+:\d{12}:stream\/[A-Za-z0-9_.-]{1,128}$/;
export const STREAM_NAME = /^[A-Za-z0-9_.-]{1,128}$/;
/** `account:streamName:creationEpochSeconds`, the Java KCL's serialised multi-stream identifier. */
const STREAM_IDENTIFIER = /^(\d{12}):([A-Za-z0-9_.-]{1,128}):(\d+)$/;

export function isInitialPosition(position: unknown): position is InitialPosition {
  return (
    position === 'TRIM_HORIZON' ||
    position === 'LATEST' ||
    (typeof position === 'object' &&
      position !== null &&
      (position as { timestamp?: unknown }).timestamp instanceof Date &&
      !Number.isNaN((position as { timestamp: Date }).timestamp.getTime()))
  );
}

/**
 * One stream config, checked: the problem (naming `where`) or the resolved config. Used for the fixed
 * list at configuration time and for each answer of a tracker at run time.
 */
export function resolveStreamConfig(
  config: unknown,
  where: string,
  defaultPosition: InitialPosition,
): ResolvedStreamConfig | string {
  if (typeof config === 'string') {
    if (STREAM_ARN.test(config)) return { identity: { streamArn: config }, initialPosition: defaultPosition };
    if (STREAM_NAME.test(config))
      return { identity: { streamName: config }, initialPosition: defaultPosition };
    return `${where} ${JSON.stringify(config)} is neither a stream name (1–128 of A–Z a–z 0–9 _ . -) nor a Kinesis stream ARN`;
  }
  if (typeof config !== 'object' || config === null) {
    return `${where} must be a stream name, an ARN, or { streamName | streamArn, initialPosition? }; got ${JSON.stringify(config)}`;
  }
  const given = config as Record<string, unknown>;
  const known = ['streamName', 'streamArn', 'initialPosition'];
  const unknown = Object.keys(given).find((key) => !known.includes(key));
  if (unknown !== undefined) {
    const suggestion = closestName(unknown, known);
    return `${where}.${unknown} is not an option${suggestion === null ? ` (${known.join(', ')})` : `: did you mean \`${suggestion}\`?`}`;
  }
  const position = given.initialPosition ?? defaultPosition;
  if (!isInitialPosition(position)) {
    return `${where}.initialPosition ${JSON.stringify(position)} must be 'TRIM_HORIZON', 'LATEST' or { timestamp: Date }`;
  }
  const hasName = given.streamName !== undefined;
  if (hasName === (given.streamArn !== undefined)) {
    return `${where} must name exactly one of streamName and streamArn`;
  }
  if (hasName) {
    if (typeof given.streamName === 'string' && STREAM_NAME.test(given.streamName)) {
      return { identity: { streamName: given.streamName }, initialPosition: position };
    }
    return `${where}.streamName ${JSON.stringify(given.streamName)} is not a valid stream name (1–128 of A–Z a–z 0–9 _ . -)`;
  }
  if (typeof given.streamArn === 'string' && STREAM_ARN.test(given.streamArn)) {
    return { identity: { streamArn: given.streamArn }, initialPosition: position };
  }
  return `${where}.streamArn ${JSON.stringify(given.streamArn)} is not a Kinesis stream ARN (arn:aws:kinesis:<region>:<account>:stream/<name>)`;
}

/** The name a stream is known by in logs and to its processors. */
export function streamNameOf(identity: StreamIdentity): string {
  return 'streamName' in identity ? identity.streamName : (identity.streamArn.split('/').pop() as string);
}

/** The Java KCL's stream identifier of a stream: `account:streamName:creationEpochSeconds`. */
export function streamIdentifierOf(description: {
  readonly streamName: string;
  readonly streamArn: string;
  readonly createdAt: Date;
}): string {
  const account = description.streamArn.split(':')[4] ?? '';
  return `${account}:${description.streamName}:${Math.floor(description.createdAt.getTime() / 1000)}`;
}

/** The parts of a stream identifier, or null when it is not one. */
export function parseStreamIdentifier(
  identifier: string,
): { readonly account: string; readonly streamName: string; readonly creationEpochSeconds: number } | null {
  const match = STREAM_IDENTIFIER.exec(identifier);
  if (match === null) return null;
  return {
    account: match[1] as string,
    streamName: match[2] as string,
    creationEpochSeconds: Number(match[3]),
  };
}

/**
 * Checks `streams`, `streamTracker`, `streamSyncIntervalMs` and `formerStreams`; null when the
 * consumer reads one stream (`streamName` / `streamArn`, checked by the caller).
 */
export function checkMultiStream(
  check: OptionProblems,
  given: {
    readonly streams?: unknown;
    readonly streamTracker?: unknown;
    readonly streamSyncIntervalMs?: unknown;
    readonly formerStreams?: unknown;
  },
  defaultPosition: InitialPosition,
): ResolvedMultiStream | null {
  const hasList = given.streams !== undefined;
  const hasTracker = given.streamTracker !== undefined;
  if (!hasList && !hasTracker) {
    for (const name of ['streamSyncIntervalMs', 'formerStreams'] as const) {
      if (given[name] !== undefined)
        check.add(`${name} applies to several streams (streams or streamTracker)`);
    }
    return null;
  }
  if (hasList && hasTracker) check.add('streams and streamTracker are both set: give exactly one');
  const syncIntervalMs = check.integer(
    'streamSyncIntervalMs',
    given.streamSyncIntervalMs,
    MULTI_STREAM_DEFAULTS.streamSyncIntervalMs,
    { min: 1 },
  );
  const formerStreams = checkFormerStreams(check, given.formerStreams);
  let list: ResolvedMultiStream['list'] = async () => [];
  if (hasList) {
    if (!Array.isArray(given.streams) || given.streams.length === 0) {
      check.add(
        'streams must be a non-empty array of stream names, ARNs or { streamName | streamArn, initialPosition? }',
      );
    } else {
      const resolved: ResolvedStreamConfig[] = [];
      given.streams.forEach((config, index) => {
        const result = resolveStreamConfig(config, `streams[${index}]`, defaultPosition);
        if (typeof result === 'string') check.add(result);
        else resolved.push(result);
      });
      const duplicate = firstDuplicate(resolved.map((config) => JSON.stringify(config.identity)));
      if (duplicate !== undefined) {
        const identity = JSON.parse(duplicate) as StreamIdentity;
        check.add(`streams names ${JSON.stringify(streamNameOf(identity))} twice`);
      }
      list = async () => resolved;
    }
  } else {
    const tracker = given.streamTracker as Partial<StreamTracker> | null;
    if (typeof tracker !== 'object' || tracker === null || typeof tracker.streams !== 'function') {
      check.add('streamTracker must be an object with a streams() method returning the stream configs');
    } else {
      list = async () => checkTrackerAnswer(await tracker.streams?.(), defaultPosition);
    }
  }
  return { list, syncIntervalMs, formerStreams };
}

function checkFormerStreams(check: OptionProblems, given: unknown): FormerStreamsStrategy {
  if (given === undefined) return MULTI_STREAM_DEFAULTS.formerStreams;
  const usage =
    "formerStreams must be { strategy: 'none' }, { strategy: 'auto', waitMs } or { strategy: 'provided', waitMs, streams() }";
  if (typeof given !== 'object' || given === null) {
    check.add(usage);
    return MULTI_STREAM_DEFAULTS.formerStreams;
  }
  const options = given as Record<string, unknown>;
  const strategies = ['none', 'auto', 'provided'] as const;
  if (!strategies.includes(options.strategy as (typeof strategies)[number])) {
    check.add(
      `formerStreams.strategy must be 'none', 'auto' or 'provided', got ${JSON.stringify(options.strategy)}`,
    );
    return MULTI_STREAM_DEFAULTS.formerStreams;
  }
  const strategy = options.strategy as (typeof strategies)[number];
  const known =
    strategy === 'none'
      ? ['strategy']
      : strategy === 'auto'
        ? ['strategy', 'waitMs']
        : ['strategy', 'waitMs', 'streams'];
  check.unknownKeys('formerStreams', options, known);
  if (strategy === 'none') return { strategy };
  if (options.waitMs === undefined) {
    check.add(
      `formerStreams.waitMs is required with strategy '${strategy}': how long a former stream is still read before its leases are deleted`,
    );
  }
  const waitMs = check.integer('formerStreams.waitMs', options.waitMs ?? 0, 0, { min: 0 });
  if (strategy === 'auto') return { strategy, waitMs };
  if (typeof options.streams !== 'function') {
    check.add(
      "formerStreams.streams must be a function returning the names, ARNs or identifiers of the streams whose leases may be deleted (strategy 'provided')",
    );
    return { strategy, waitMs, streams: () => [] };
  }
  const streams = options.streams as () => readonly string[] | Promise<readonly string[]>;
  return { strategy, waitMs, streams: () => streams.call(given) };
}

/** A tracker's answer, checked: a wrong answer fails the sync (the last answer stays in force). */
function checkTrackerAnswer(answer: unknown, defaultPosition: InitialPosition): ResolvedStreamConfig[] {
  if (!Array.isArray(answer)) {
    throw new TypeError(
      `@kcl/consumer: streamTracker.streams() must return an array of stream configs, got ${JSON.stringify(answer)}`,
    );
  }
  const problems: string[] = [];
  const resolved: ResolvedStreamConfig[] = [];
  answer.forEach((config, index) => {
    const result = resolveStreamConfig(config, `streamTracker.streams()[${index}]`, defaultPosition);
    if (typeof result === 'string') problems.push(result);
    else resolved.push(result);
  });
  if (problems.length > 0) throw new TypeError(`@kcl/consumer: ${problems.join('; ')}`);
  return resolved;
}

function firstDuplicate(values: readonly string[]): string | undefined {
  const seen = new Set<string>();
  for (const value of values) {
    if (seen.has(value)) return value;
    seen.add(value);
  }
  return undefined;
}
