import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ConfigurationError } from '@kcl/core';
import { describe, expect, it } from 'vitest';
import { parseProperties, readPropertiesFile } from './properties-parser.js';

const value = (text: string, key: string) => parseProperties(text).values.get(key)?.value;

describe('parseProperties (java.util.Properties rules)', () => {
  it('reads key = value pairs and skips # and ! comments and blank lines', () => {
    const parsed = parseProperties(
      '# comment\n! also a comment\n\nexecutableName = node app.js\n  streamName=orders\n',
    );
    expect([...parsed.values.keys()]).toEqual(['executableName', 'streamName']);
    expect(value('executableName = node app.js', 'executableName')).toBe('node app.js');
    expect(parsed.values.get('streamName')).toEqual({ key: 'streamName', value: 'orders', line: 5 });
  });

  it.each([
    ['key=value', 'value'],
    ['key:value', 'value'],
    ['key value', 'value'],
    ['key   =   value', 'value'],
    ['key\t:\tvalue', 'value'],
    ['key', ''],
    ['key =', ''],
    ['key = value with trailing space  ', 'value with trailing space  '],
    ['key = a=b:c', 'a=b:c'],
  ])('separates %j', (line, expected) => {
    expect(value(line, 'key')).toBe(expected);
  });

  it('joins continuation lines, dropping the next line’s leading whitespace', () => {
    expect(value('executableName = python3 \\\n    app.py', 'executableName')).toBe('python3 app.py');
    expect(value('a = one\\\n  two\\\n  three', 'a')).toBe('onetwothree');
    // An even number of backslashes is an escaped backslash, not a continuation.
    expect(value('a = path\\\\\nb = 2', 'a')).toBe('path\\');
    expect(value('a = path\\\\\nb = 2', 'b')).toBe('2');
  });

  it('understands the escapes, in keys and values', () => {
    expect(value('a = tab\\there\\nline\\u0041\\:\\=\\\\', 'a')).toBe('tab\there\nlineA:=\\');
    expect(value('my\\ key = v', 'my key')).toBe('v');
    expect(value('my\\:key = v', 'my:key')).toBe('v');
  });

  it('keeps the later of two values for a key, as Java does', () => {
    const parsed = parseProperties('a = 1\na = 2\n');
    expect(parsed.entries).toHaveLength(2);
    expect(parsed.values.get('a')?.value).toBe('2');
  });

  it('reports a malformed \\u escape with its line', () => {
    const parsed = parseProperties('ok = 1\nbad = \\u12\n');
    expect(parsed.problems).toEqual([
      'line 2: malformed \\u escape "\\u12" (four hexadecimal digits are needed)',
    ]);
  });

  it('handles CRLF line ends', () => {
    expect([...parseProperties('a = 1\r\nb = 2\r\n').values.values()].map((entry) => entry.value)).toEqual([
      '1',
      '2',
    ]);
  });

  it('reads a file, and names a missing one', async () => {
    const directory = mkdtempSync(join(tmpdir(), 'kcl-properties-'));
    writeFileSync(join(directory, 'app.properties'), 'applicationName = billing\n');
    expect(
      (await readPropertiesFile(join(directory, 'app.properties'))).values.get('applicationName')?.value,
    ).toBe('billing');
    const missing = join(directory, 'missing.properties');
    await expect(readPropertiesFile(missing)).rejects.toThrow(ConfigurationError);
    await expect(readPropertiesFile(missing)).rejects.toThrow(
      `properties file ${missing} cannot be read: it does not exist`,
    );
  });
});
