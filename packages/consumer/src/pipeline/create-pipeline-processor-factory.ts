import { noopLogger, OptionProblems, systemClock, systemRandom } from '@kcl/core';
import type { ProcessorContext } from '../processing/record-processor.js';
import type { PipelineOptions, ResolvedPipelineOptions } from './pipeline-options.js';
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
  const check = new OptionProblems('@kcl/consumer createPipelineProcessorFactory');
  const resolved = resolvePipelineOptions(options, check.within('pipeline'));
  const given = (runtime ?? {}) as Partial<PipelineRuntime>;
  const runtimeCheck = check.within('runtime');
  if (given.clock === undefined) {
    check.add('runtime.clock is required: a Clock (systemClock from @kcl/core, or a ManualClock in tests)');
  }
  if (given.random === undefined)
    check.add('runtime.random is required: a RandomSource (systemRandom from @kcl/core)');
  if (given.logger === undefined) {
    check.add('runtime.logger is required: a Logger (noopLogger from @kcl/core, or your own)');
  }
  // The fallbacks are never used: a missing part is a problem above, and nothing is built then.
  const checked: PipelineRuntime = {
    clock: runtimeCheck.clock('clock', given.clock, systemClock),
    random: runtimeCheck.random('random', given.random, systemRandom),
    logger: runtimeCheck.logger('logger', given.logger, noopLogger),
  };
  check.throwIfAny();
  return pipelineProcessorFactory(resolved, checked);
}

/**
 * The factory for options and a runtime already checked (`createConsumer` checks them with its own,
 * and passes its `exactlyOnce`).
 */
export function pipelineProcessorFactory(
  options: ResolvedPipelineOptions,
  runtime: PipelineRuntime,
  guarantees: { readonly exactlyOnce: boolean } = { exactlyOnce: false },
): PipelineProcessorFactory {
  return (_shardId, context) => new PipelineProcessor(options, runtime, context, guarantees.exactlyOnce);
}
