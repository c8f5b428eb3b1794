import { readFile } from 'node:fs/promises';
import { ConfigurationError } from '@kcl/core';

/** One `key = value` pair of a properties file, with the line it starts on (1-based). */
export interface PropertyEntry {
  readonly key: string;
  readonly value: string;
  readonly line: number;
}

export interface ParsedProperties {
  /** Every pair in file order, duplicates included. */
  readonly entries: readonly PropertyEntry[];
  /** The effective values: for a key given twice the later one wins, as in `java.util.Properties`. */
  readonly values: ReadonlyMap<string, PropertyEntry>;
  /** Malformed escapes, with their line numbers. */
  readonly problems: readonly string[];
}

/**
 * Parses the text of a `.properties` file the way `java.util.Properties.load` reads it: `#` and `!`
 * comments, `=`, `:` or whitespace between key and value, a trailing backslash continuing a line (the
 * next line's leading whitespace dropped), and the escapes `\t \n \r \f \uXXXX` (any other escaped
 * character stands for itself). Leading whitespace of a value is dropped, trailing whitespace kept.
 */
export function parseProperties(text: string): ParsedProperties {
  const entries: PropertyEntry[] = [];
  const problems: string[] = [];
  const naturalLines = text.split(/\r\n|\r|\n/);

  let index = 0;
  while (index < naturalLines.length) {
    const startLine = index + 1;
    let line = stripLeadingWhitespace(naturalLines[index] ?? '');
    index += 1;
    if (line === '' || line.startsWith('#') || line.startsWith('!')) continue;
    // Join continuation lines: an odd number of trailing backslashes escapes the line break.
    while (endsWithContinuation(line) && index < naturalLines.length) {
      line = line.slice(0, -1) + stripLeadingWhitespace(naturalLines[index] ?? '');
      index += 1;
    }
    if (endsWithContinuation(line)) line = line.slice(0, -1);

    const { rawKey, rawValue } = splitKeyValue(line);
    const key = unescapeProperty(rawKey, startLine, problems);
    const value = unescapeProperty(rawValue, startLine, problems);
    entries.push({ key, value, line: startLine });
  }

  const values = new Map<string, PropertyEntry>();
  for (const entry of entries) values.set(entry.key, entry);
  return { entries, values, problems };
}

const WHITESPACE = new Set([' ', '\t', '\f']);

function stripLeadingWhitespace(line: string): string {
  let start = 0;
  while (start < line.length && WHITESPACE.has(line[start] as string)) start += 1;
  return line.slice(start);
}

function endsWithContinuation(line: string): boolean {
  let backslashes = 0;
  for (let position = line.length - 1; position >= 0 && line[position] === '\\'; position--) backslashes += 1;
  return backslashes % 2 === 1;
}

function splitKeyValue(line: string): { rawKey: string; rawValue: string } {
  let position = 0;
  while (position < line.length) {
    const character = line[position] as string;
    if (character === '\\') {
      position += 2;
      continue;
    }
    if (character === '=' || character === ':' || WHITESPACE.has(character)) break;
    position += 1;
  }
  const rawKey = line.slice(0, Math.min(position, line.length));
  let rest = line.slice(rawKey.length);
  rest = stripLeadingWhitespace(rest);
  if (rest.startsWith('=') || rest.startsWith(':')) rest = stripLeadingWhitespace(rest.slice(1));
  return { rawKey, rawValue: rest };
}

function unescapeProperty(raw: string, line: number, problems: string[]): string {
  if (!raw.includes('\\')) return raw;
  let result = '';
  for (let position = 0; position < raw.length; position++) {
    const character = raw[position] as string;
    if (character !== '\\') {
      result += character;
      continue;
    }
    position += 1;
    const escaped = raw[position];
    if (escaped === undefined) break;
    switch (escaped) {
      case 't':
        result += '\t';
        break;
      case 'n':
        result += '\n';
        break;
      case 'r':
        result += '\r';
        break;
      case 'f':
        result += '\f';
        break;
      case 'u': {
        const hex = raw.slice(position + 1, position + 5);
        if (!/^[0-9a-fA-F]{4}$/.test(hex)) {
          problems.push(
            `line ${line}: malformed \\u escape "\\u${hex}" (four hexadecimal digits are needed)`,
          );
          result += `\\u${hex}`;
        } else {
          result += String.fromCharCode(Number.parseInt(hex, 16));
        }
        position += 4;
        break;
      }
      default:
        result += escaped;
    }
  }
  return result;
}

/** Reads and parses a properties file; an unreadable file is a `ConfigurationError` naming it. */
export async function readPropertiesFile(path: string): Promise<ParsedProperties> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (error) {
    const reason = (error as NodeJS.ErrnoException).code === 'ENOENT' ? 'it does not exist' : String(error);
    throw new ConfigurationError('@kcl/multilang', [`properties file ${path} cannot be read: ${reason}`]);
  }
  return parseProperties(text);
}
