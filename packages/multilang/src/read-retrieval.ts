import type { RetrievalOptions } from '@kcl/consumer';
import type {
  MultiLangConfiguration,
  RetrievalConfiguration,
  RetrievalModeProperty,
} from './multilang-configuration.js';
import type { PropertyReader } from './property-reader.js';

/**
 * The keys of the Java daemon's PollingConfig: any one of them set makes `retrievalMode = DEFAULT`
 * poll instead of using fan-out (`RetrievalMode.decideForDefault`). Three of them have no effect
 * here otherwise, but they still take part in that decision, so a file behaves as it did in Java.
 */
export const POLLING_KEYS: readonly string[] = [
  'maxRecords',
  'idleTimeBetweenReadsInMillis',
  'retryGetRecordsInSeconds',
  'maxGetRecordsThreadPool',
  'millisBehindLatestThresholdForReducedTps',
];

// As @kcl/consumer checks `retrieval` (the unit tests hold the two together).
const CONSUMER_NAME = /^[A-Za-z0-9_.-]{1,128}$/;
const CONSUMER_ARN =
  /^(arn:aws[a-z-]*:kinesis:[a-z0-9-]+:\d{12}:stream\/([A-Za-z0-9_.-]{1,128}))\/consumer\/[A-Za-z0-9_.-]{1,128}:\d+$/;
const CONSUMER_NAME_RULE = '1–128 of A–Z a–z 0–9 _ . -';

/**
 * `retrievalMode` and `fanoutConfig.*`: enhanced fan-out or polling, decided as the Java daemon
 * decides — FANOUT and POLLING as written; DEFAULT (also when unset) is fan-out unless a polling key
 * is set. Fan-out registers `fanoutConfig.consumerName` (default `applicationName`), or uses
 * `fanoutConfig.consumerArn` as given.
 */
export function readRetrieval(
  reader: PropertyReader,
  applicationName: string | null,
  stream: MultiLangConfiguration['stream'],
): RetrievalConfiguration {
  const retrievalMode = reader.oneOf(
    'retrievalMode',
    ['DEFAULT', 'POLLING', 'FANOUT'] as const,
    'DEFAULT',
    'upper',
  );
  const pollingKeys = POLLING_KEYS.filter((key) => reader.given(key));
  const fanout = retrievalMode === 'FANOUT' || (retrievalMode === 'DEFAULT' && pollingKeys.length === 0);
  if (!fanout) {
    for (const key of ['fanoutConfig.consumerName', 'fanoutConfig.consumerArn']) {
      if (reader.has(key)) {
        reader.warnings.push(
          `property ${key} has no effect: records are read by polling (${pollingReason(retrievalMode, pollingKeys)})`,
        );
      }
    }
    return { mode: 'polling', retrievalMode, pollingKeys };
  }
  const ignored = pollingKeys.filter((key) => reader.has(key));
  if (ignored.length > 0) {
    reader.warnings.push(
      `retrievalMode = FANOUT: records are pushed by SubscribeToShard, so ${listOf(ignored)} only ${ignored.length === 1 ? 'applies' : 'apply'} where a closed shard's last records are read with GetRecords (on an emulator that never ends its subscription)`,
    );
  }
  const consumerArn = readConsumerArn(reader, stream);
  return {
    mode: 'fanout',
    retrievalMode,
    pollingKeys,
    consumerName: readConsumerName(reader, applicationName, consumerArn !== null),
    consumerArn,
  };
}

function readConsumerName(reader: PropertyReader, applicationName: string | null, hasArn: boolean): string {
  const given = reader.text('fanoutConfig.consumerName');
  if (given !== null) {
    if (!CONSUMER_NAME.test(given)) {
      reader.problems.add(
        `fanoutConfig.consumerName ${JSON.stringify(given)} is not a stream consumer name (${CONSUMER_NAME_RULE})`,
      );
    }
    if (hasArn) {
      reader.notices.push(
        'fanoutConfig.consumerArn is set: that consumer is used as given, and fanoutConfig.consumerName is not registered',
      );
    }
    return given;
  }
  const name = applicationName ?? '';
  // A missing applicationName is reported once, by its own section; an ARN needs no name.
  if (applicationName !== null && !hasArn && !CONSUMER_NAME.test(name)) {
    reader.problems.add(
      `fanoutConfig.consumerName is needed for enhanced fan-out: applicationName ${JSON.stringify(name)} is not a stream consumer name (${CONSUMER_NAME_RULE}); or set retrievalMode = POLLING`,
    );
  }
  return name;
}

function readConsumerArn(reader: PropertyReader, stream: MultiLangConfiguration['stream']): string | null {
  const consumerArn = reader.text('fanoutConfig.consumerArn');
  if (consumerArn === null) return null;
  const match = CONSUMER_ARN.exec(consumerArn);
  if (match === null) {
    reader.problems.add(
      `fanoutConfig.consumerArn ${JSON.stringify(consumerArn)} is not a stream consumer ARN (arn:aws:kinesis:<region>:<account>:stream/<stream>/consumer/<name>:<timestamp>)`,
    );
    return null;
  }
  const streamArnOfConsumer = match[1] ?? '';
  const streamNameOfConsumer = match[2] ?? '';
  // A consumer of another stream would subscribe to that stream's shards of the same ids.
  const ours = 'streamArn' in stream ? stream.streamArn : stream.streamName;
  const elsewhere =
    'streamArn' in stream ? ours !== streamArnOfConsumer : ours !== '' && ours !== streamNameOfConsumer;
  if (elsewhere) {
    reader.problems.add(
      `fanoutConfig.consumerArn is a consumer of stream ${streamNameOfConsumer}, not of ${ours}: give a consumer of the stream being read`,
    );
  }
  return consumerArn;
}

/** What the consumer is given for a retrieval configuration. */
export function retrievalOptions(retrieval: RetrievalConfiguration): RetrievalOptions {
  if (retrieval.mode === 'polling') return { mode: 'polling' };
  return {
    mode: 'fanout',
    consumerName: retrieval.consumerName,
    ...(retrieval.consumerArn === null ? {} : { consumerArn: retrieval.consumerArn }),
  };
}

const DEFAULT_RULE = `With retrievalMode DEFAULT (also when it is not set) records are read by enhanced fan-out unless a polling key (${POLLING_KEYS.join(', ')}) is set, as in the Java daemon`;

/**
 * One line for the start-up log: how records are read, why, and the DEFAULT rule. `warn` when
 * DEFAULT turned into polling because of a polling key, which the Java daemon also warns about.
 */
export function describeRetrieval(retrieval: RetrievalConfiguration): {
  readonly message: string;
  readonly warn: boolean;
} {
  if (retrieval.mode === 'fanout') {
    const consumer = retrieval.consumerArn ?? retrieval.consumerName;
    const why =
      retrieval.retrievalMode === 'FANOUT'
        ? 'retrievalMode = FANOUT'
        : 'retrievalMode is DEFAULT and no polling key is set; set retrievalMode = POLLING to poll instead';
    return {
      message: `records are read by enhanced fan-out (SubscribeToShard) with stream consumer ${consumer}: ${why}. ${DEFAULT_RULE}`,
      warn: false,
    };
  }
  const why = pollingReason(retrieval.retrievalMode, retrieval.pollingKeys);
  const advice = retrieval.retrievalMode === 'DEFAULT' ? '; set retrievalMode = FANOUT for fan-out' : '';
  return {
    message: `records are read by polling (GetRecords): ${why}${advice}. ${DEFAULT_RULE}`,
    warn: retrieval.retrievalMode === 'DEFAULT',
  };
}

function pollingReason(retrievalMode: RetrievalModeProperty, pollingKeys: readonly string[]): string {
  if (retrievalMode === 'POLLING') return 'retrievalMode = POLLING';
  return `retrievalMode is DEFAULT and ${listOf(pollingKeys)} ${pollingKeys.length === 1 ? 'is' : 'are'} set`;
}

function listOf(keys: readonly string[]): string {
  if (keys.length <= 1) return keys.join('');
  return `${keys.slice(0, -1).join(', ')} and ${keys.at(-1)}`;
}
