export type LogLevel = 'debug' | 'info' | 'warn' | 'error';

export type LogFields = Readonly<Record<string, unknown>>;

/** A structured logger. Adapt pino, winston or console to it; library code logs nothing else. */
export interface Logger {
  debug(message: string, fields?: LogFields): void;
  info(message: string, fields?: LogFields): void;
  warn(message: string, fields?: LogFields): void;
  error(message: string, fields?: LogFields): void;
}

export const noopLogger: Logger = {
  debug: () => {},
  info: () => {},
  warn: () => {},
  error: () => {},
};

const LEVEL_ORDER: Readonly<Record<LogLevel, number>> = { debug: 10, info: 20, warn: 30, error: 40 };

export interface LineLoggerOptions {
  /** Receives each formatted line, e.g. `(line) => process.stderr.write(line + '\n')`. */
  readonly write: (line: string, level: LogLevel) => void;
  readonly level?: LogLevel;
  readonly clock?: { now(): number };
  /** Fields added to every line, e.g. `{ workerId }`. */
  readonly fields?: LogFields;
}

/** A logger that formats one line per entry: time, level, message and the fields as JSON. */
export function createLineLogger(options: LineLoggerOptions): Logger {
  const threshold = LEVEL_ORDER[options.level ?? 'info'];
  const base = options.fields ?? {};
  const log =
    (level: LogLevel) =>
    (message: string, fields?: LogFields): void => {
      if (LEVEL_ORDER[level] < threshold) return;
      const merged = { ...base, ...fields };
      const time = new Date(options.clock?.now() ?? Date.now()).toISOString();
      const suffix = Object.keys(merged).length === 0 ? '' : ` ${safeJson(merged)}`;
      options.write(`${time} ${level.toUpperCase().padEnd(5)} ${message}${suffix}`, level);
    };
  return { debug: log('debug'), info: log('info'), warn: log('warn'), error: log('error') };
}

/** Adds fields to every entry of another logger. */
export function childLogger(parent: Logger, fields: LogFields): Logger {
  return {
    debug: (message, more) => parent.debug(message, { ...fields, ...more }),
    info: (message, more) => parent.info(message, { ...fields, ...more }),
    warn: (message, more) => parent.warn(message, { ...fields, ...more }),
    error: (message, more) => parent.error(message, { ...fields, ...more }),
  };
}

function safeJson(value: unknown): string {
  return JSON.stringify(value, (_key, field: unknown) => {
    if (typeof field === 'bigint') return field.toString();
    if (field instanceof Error) return { name: field.name, message: field.message };
    return field;
  });
}
