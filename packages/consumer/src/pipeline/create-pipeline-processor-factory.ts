import { ConfigurationError } from '@kcl/core';
import type { ProcessorContext } from '../record-processor.js';
import type { PipelineOptions } from './pipeline-options.js';
import { resolvePipelineOptions } from './pipeline-options.js';
import type { PipelineRuntime } from './pipeline-processor.js';
import { PipelineProcessor } from './pipeline-processor.js';

/** A `RecordProcessorFactory` whose processors are pipelines. */
export type PipelineProcessorFactory = (shardId: string, context: ProcessorContext) => PipelineProcessor;

/**
 * Builds a record processor factory that runs a Broadway-style pipeline per lease: pass it as the
 * consumer's `processor`. Options are checked here; one `ConfigurationError` lists every problem.
 *
 * ```ts
 * createConsumer({
 *   …,
 *   processor: createPipelineProcessorFactory(
 *     { handleMessage, handleBatch, partitionBy: (message) => message.record.partitionKey },
 *     { clock: systemClock, random: systemRandom, logger },
 *   ),
 * });
 * ```
 */
export function createPipelineProcessorFactory(
  options: PipelineOptions,
  runtime: PipelineRuntime,
): PipelineProcessorFactory {
  const { options: resolved, problems } = resolvePipelineOptions(options);
  const given = (runtime ?? {}) as Partial<PipelineRuntime>;
  if (typeof given.clock?.sleep !== 'function' || typeof given.clock?.monotonicNow !== 'function') {
    problems.push('runtime.clock must be a Clock (systemClock from @kcl/core, or a ManualClock in tests)');
  }
  if (typeof given.random !== 'function') {
    problems.push('runtime.random must be a RandomSource (systemRandom from @kcl/core)');
  }
  if (given.logger === undefined || typeof given.logger.warn !== 'function') {
    problems.push('runtime.logger must be a Logger (noopLogger from @kcl/core, or your own)');
  }
  if (problems.length > 0)
    throw new ConfigurationError('@kcl/consumer createPipelineProcessorFactory', problems);
  return (_shardId, context) => new PipelineProcessor(resolved, runtime, context);
}
