import { createRequire } from 'node:module';
import { dirname, resolve } from 'node:path';
import type { Logger, LogLevel } from '@kcl/core';
import { ConfigurationError, createLineLogger } from '@kcl/core';
import type { MultiLangArguments } from '../cli-arguments.js';
import type { ResolvedMultiLangConfiguration } from '../multilang-configuration.js';
import { createMultiLangDaemon } from '../multilang-daemon.js';
import { readPropertiesFile } from '../properties-parser.js';
import { resolveMultiLangConfiguration } from '../resolve-multilang-configuration.js';
import { signalProcessGroup } from './process-group.js';

/** The package version, for --version. */
export function packageVersion(): string {
  const require = createRequire(import.meta.url);
  return (require('../../package.json') as { version: string }).version;
}

function stderrLogger(level: LogLevel): Logger {
  return createLineLogger({ level, write: (line) => process.stderr.write(`${line}\n`) });
}

/**
 * Reads the properties, starts the daemon and runs it until SIGINT/SIGTERM (graceful stop; a second
 * signal forces it). Resolves with the process exit code.
 */
export async function runDaemon(
  args: MultiLangArguments & { readonly propertiesFile: string },
): Promise<number> {
  let logger = stderrLogger(args.logLevel ?? 'info');
  for (const note of args.notes) logger.info(note);

  let resolved: ResolvedMultiLangConfiguration;
  try {
    const properties = await readPropertiesFile(args.propertiesFile);
    resolved = resolveMultiLangConfiguration(properties, {
      environment: process.env,
      workingDirectory: process.cwd(),
      propertiesDirectory: dirname(resolve(args.propertiesFile)),
    });
  } catch (error) {
    process.stderr.write(`${error instanceof Error ? error.message : String(error)}\n`);
    return 1;
  }
  const { configuration } = resolved;
  logger = stderrLogger(args.logLevel ?? configuration.logLevel);
  for (const warning of resolved.warnings) logger.warn(warning);
  for (const notice of resolved.notices) logger.info(notice);
  if (configuration.processingLanguage !== null) {
    logger.info('processing language', { processingLanguage: configuration.processingLanguage });
  }

  const daemon = createMultiLangDaemon({
    configuration,
    environment: process.env,
    workingDirectory: process.cwd(),
    logger,
    signalChild: signalProcessGroup,
    ...(args.exitOnChildFailure === null ? {} : { exitOnChildFailure: args.exitOnChildFailure }),
  });

  let signals = 0;
  let forced = false;
  const onSignal = (signal: NodeJS.Signals): void => {
    signals += 1;
    if (signals === 1) {
      logger.info(`${signal} received: stopping gracefully (send it again to force)`);
      void daemon.stop({ graceful: true });
    } else {
      logger.warn(`${signal} received again: forcing the stop`);
      forced = true;
      void daemon.stop({ graceful: false });
    }
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  try {
    await daemon.start();
    await daemon.stopped();
    logger.info('kcl-multilang stopped');
    return forced ? 130 : 0;
  } catch (error) {
    if (ConfigurationError.is(error)) process.stderr.write(`${error.message}\n`);
    else logger.error('kcl-multilang failed', { error });
    await daemon.stopped().catch(() => undefined);
    return 1;
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  }
}
