import {
  readAwsClients,
  readChild,
  readCompatibility,
  readLeaseStore,
  readMetrics,
  readProcessing,
  readStream,
  readTimings,
} from './configuration-sections.js';
import type {
  MultiLangConfigurationContext,
  ResolvedMultiLangConfiguration,
} from './multilang-configuration.js';
import type { PropertyInput } from './property-reader.js';
import { PropertyReader } from './property-reader.js';
import { readRetrieval } from './read-retrieval.js';

/**
 * Reads the keys of a MultiLangDaemon properties file (reference §1.10) into a configuration. Every
 * invalid value is collected and thrown at once as a `ConfigurationError`; unknown keys and keys
 * without effect are returned as warnings, by name.
 */
export function resolveMultiLangConfiguration(
  properties: PropertyInput,
  context: MultiLangConfigurationContext,
): ResolvedMultiLangConfiguration {
  const reader = new PropertyReader(properties, '@kcl/multilang (properties)');
  const child = readChild(reader, context);
  const { applicationName, arnRegion, ...stream } = readStream(reader);
  const aws = readAwsClients(reader, context, arnRegion);
  const leaseStore = readLeaseStore(reader, context, applicationName, aws.dynamoDBEndpoint);
  const timings = readTimings(reader);
  const processing = readProcessing(reader);
  const retrieval = readRetrieval(reader, applicationName, stream.stream);
  const metrics = readMetrics(reader, aws.kinesisEndpoint);
  const { logLevel } = readCompatibility(reader);
  reader.problems.throwIfAny();

  return {
    configuration: {
      ...child,
      ...stream,
      // Set: a missing one is a problem, thrown above.
      applicationName: applicationName as string,
      ...aws,
      leaseStore,
      timings,
      retrieval,
      ...processing,
      metrics,
      logLevel,
    },
    warnings: reader.warnings,
    notices: reader.notices,
  };
}
