import { parseArgs } from 'node:util';
import type { LogLevel } from '@kcl/core';
import { OptionProblems } from '@kcl/core';

/** What `kcl-multilang` was asked to do. */
export interface MultiLangArguments {
  readonly command: 'run' | 'help' | 'version';
  readonly propertiesFile: string | null;
  readonly logConfiguration: string | null;
  readonly exitOnChildFailure: boolean | null;
  readonly logLevel: LogLevel | null;
  /** Things to tell the user (a flag and a positional file both given, ignored options). */
  readonly notes: readonly string[];
}

/** What `kcl-bootstrap` was asked to do. */
export interface BootstrapArguments extends MultiLangArguments {
  /** Without `-e` kcl-bootstrap only prints the command it would run. */
  readonly execute: boolean;
}

export type ArgumentsResult<T> =
  | { readonly ok: true; readonly value: T }
  | { readonly ok: false; readonly problems: readonly string[] };

const LOG_LEVELS: readonly LogLevel[] = ['debug', 'info', 'warn', 'error'];

export const MULTILANG_USAGE = `Usage: kcl-multilang [--properties] <file.properties> [options]

Runs a KCL MultiLangDaemon application (aws-kcl, amazon_kclpy, Go…) without Java.

Options:
  -p, --properties, --properties-file <file>   the properties file (or give it as the only argument)
  -l, --log-configuration <file>                accepted for compatibility; logs go to stderr
      --exit-on-child-failure                   stop the daemon when any child fails (the Java behaviour)
      --log-level <debug|info|warn|error>       default info (or kcl.logLevel)
  -h, --help                                    this help
  -v, --version                                 the version`;

export const BOOTSTRAP_USAGE = `Usage: kcl-bootstrap -p <file.properties> -e [options]

A drop-in for aws-kcl's kcl-bootstrap that runs kcl-multilang instead of Java.

Options:
  -p, --properties <file>            the properties file (required)
  -e, --execute                      run the application (without it, print the command)
  -l, --log-configuration <file>     accepted for compatibility; logs go to stderr
  -j, --java <path>                  accepted and ignored: no Java is needed
  -c, --jar-path <path>              accepted and ignored: no jars are needed
      --exit-on-child-failure        stop the daemon when any child fails (the Java behaviour)
      --log-level <level>            debug, info, warn or error
  -h, --help                         this help`;

/** Reads `kcl-multilang`'s arguments (the Java MultiLangDaemon's, plus a few of its own). */
export function parseMultiLangArguments(argv: readonly string[]): ArgumentsResult<MultiLangArguments> {
  let parsed: ReturnType<typeof parseArgs>;
  try {
    parsed = parseArgs({
      args: [...argv],
      allowPositionals: true,
      strict: true,
      options: {
        properties: { type: 'string', short: 'p' },
        'properties-file': { type: 'string' },
        'log-configuration': { type: 'string', short: 'l' },
        'exit-on-child-failure': { type: 'boolean' },
        'log-level': { type: 'string' },
        help: { type: 'boolean', short: 'h' },
        version: { type: 'boolean', short: 'v' },
      },
    });
  } catch (error) {
    return { ok: false, problems: [error instanceof Error ? error.message : String(error)] };
  }
  const values = parsed.values as Record<string, string | boolean | undefined>;
  const check = new OptionProblems('kcl-multilang');
  const notes: string[] = [];
  const flag = stringValue(values.properties) ?? stringValue(values['properties-file']);
  if (values.properties !== undefined && values['properties-file'] !== undefined) {
    check.add('give the properties file once (--properties or --properties-file)');
  }
  if (parsed.positionals.length > 1) {
    check.add(
      `expected one properties file, got ${parsed.positionals.length} arguments: ${parsed.positionals.join(' ')}`,
    );
  }
  const positional = parsed.positionals[0] ?? null;
  if (flag !== null && positional !== null) {
    notes.push(`both --properties ${flag} and ${positional} were given: using ${flag}`);
  }
  const common = commonOptions(values, check, notes);
  const command = values.help === true ? 'help' : values.version === true ? 'version' : 'run';
  const propertiesFile = flag ?? positional;
  if (command === 'run' && propertiesFile === null) {
    check.add('properties file missing: kcl-multilang --properties <file.properties>');
  }
  if (check.problems.length > 0) return { ok: false, problems: check.problems };
  return { ok: true, value: { command, propertiesFile, ...common, notes } };
}

/** Reads `kcl-bootstrap`'s arguments (aws-kcl's, with `-j` and `-c` accepted and ignored). */
export function parseBootstrapArguments(argv: readonly string[]): ArgumentsResult<BootstrapArguments> {
  let parsed: ReturnType<typeof parseArgs>;
  try {
    parsed = parseArgs({
      args: [...argv],
      allowPositionals: false,
      strict: true,
      options: {
        properties: { type: 'string', short: 'p' },
        'log-configuration': { type: 'string', short: 'l' },
        java: { type: 'string', short: 'j' },
        'jar-path': { type: 'string', short: 'c' },
        execute: { type: 'boolean', short: 'e' },
        'exit-on-child-failure': { type: 'boolean' },
        'log-level': { type: 'string' },
        help: { type: 'boolean', short: 'h' },
      },
    });
  } catch (error) {
    return { ok: false, problems: [error instanceof Error ? error.message : String(error)] };
  }
  const values = parsed.values as Record<string, string | boolean | undefined>;
  const check = new OptionProblems('kcl-bootstrap');
  const notes: string[] = [];
  if (values.java !== undefined) notes.push('--java is ignored: kcl-multilang needs no Java');
  if (values['jar-path'] !== undefined) notes.push('--jar-path is ignored: kcl-multilang needs no jars');
  const common = commonOptions(values, check, notes);
  const command = values.help === true ? 'help' : 'run';
  const propertiesFile = stringValue(values.properties);
  if (command === 'run' && propertiesFile === null)
    check.add('-p/--properties <file.properties> is required');
  if (check.problems.length > 0) return { ok: false, problems: check.problems };
  return { ok: true, value: { command, propertiesFile, ...common, notes, execute: values.execute === true } };
}

function commonOptions(
  values: Record<string, string | boolean | undefined>,
  check: OptionProblems,
  notes: string[],
): Pick<MultiLangArguments, 'logConfiguration' | 'exitOnChildFailure' | 'logLevel'> {
  const logConfiguration = stringValue(values['log-configuration']);
  if (logConfiguration !== null) {
    notes.push(
      `--log-configuration ${logConfiguration} is not used: kcl-multilang logs one line per entry to stderr (see --log-level)`,
    );
  }
  const level = stringValue(values['log-level']) ?? undefined;
  const known = LOG_LEVELS.find((candidate) => candidate === level?.toLowerCase());
  return {
    logConfiguration,
    exitOnChildFailure: values['exit-on-child-failure'] === true ? true : null,
    logLevel: level === undefined ? null : check.oneOf('--log-level', known ?? level, LOG_LEVELS, 'info'),
  };
}

function stringValue(value: string | boolean | undefined): string | null {
  return typeof value === 'string' ? value : null;
}
