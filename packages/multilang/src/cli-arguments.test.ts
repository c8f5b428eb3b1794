import { describe, expect, it } from 'vitest';
import { parseBootstrapArguments, parseMultiLangArguments } from './cli-arguments.js';

describe('parseMultiLangArguments', () => {
  it.each([
    [['--properties', 'app.properties']],
    [['-p', 'app.properties']],
    [['--properties-file', 'app.properties']],
    [['--properties=app.properties']],
    [['app.properties']],
  ])('takes the properties file from %j', (argv) => {
    const result = parseMultiLangArguments(argv);
    expect(result).toMatchObject({
      ok: true,
      value: { command: 'run', propertiesFile: 'app.properties', notes: [] },
    });
  });

  it('prefers the flag over a positional file, with a note (as the Java daemon)', () => {
    expect(parseMultiLangArguments(['-p', 'a.properties', 'b.properties'])).toMatchObject({
      ok: true,
      value: {
        propertiesFile: 'a.properties',
        notes: ['both --properties a.properties and b.properties were given: using a.properties'],
      },
    });
  });

  it('accepts -l, --exit-on-child-failure and --log-level', () => {
    const result = parseMultiLangArguments([
      '-p',
      'a.properties',
      '-l',
      'logback.xml',
      '--exit-on-child-failure',
      '--log-level',
      'DEBUG',
    ]);
    expect(result).toMatchObject({
      ok: true,
      value: { logConfiguration: 'logback.xml', exitOnChildFailure: true, logLevel: 'debug' },
    });
    expect(result.ok && result.value.notes[0]).toContain('--log-configuration logback.xml is not used');
    expect(parseMultiLangArguments(['a.properties'])).toMatchObject({
      value: { exitOnChildFailure: null, logLevel: null },
    });
  });

  it('reports what is wrong', () => {
    expect(parseMultiLangArguments([])).toEqual({
      ok: false,
      problems: ['properties file missing: kcl-multilang --properties <file.properties>'],
    });
    expect(parseMultiLangArguments(['a', 'b'])).toEqual({
      ok: false,
      problems: ['expected one properties file, got 2 arguments: a b'],
    });
    expect(parseMultiLangArguments(['--nope']).ok).toBe(false);
    expect(parseMultiLangArguments(['a.properties', '--log-level', 'loud'])).toEqual({
      ok: false,
      problems: ['--log-level must be one of debug, info, warn, error, got "loud"'],
    });
  });

  it('answers --help and --version without a file', () => {
    expect(parseMultiLangArguments(['--help'])).toMatchObject({ ok: true, value: { command: 'help' } });
    expect(parseMultiLangArguments(['-v'])).toMatchObject({ ok: true, value: { command: 'version' } });
  });
});

describe('parseBootstrapArguments', () => {
  it('reads aws-kcl kcl-bootstrap options, ignoring -j and -c with a note', () => {
    expect(
      parseBootstrapArguments(['-p', 'app.properties', '-e', '-j', '/usr/bin/java', '-c', 'jars']),
    ).toEqual({
      ok: true,
      value: {
        command: 'run',
        propertiesFile: 'app.properties',
        execute: true,
        logConfiguration: null,
        exitOnChildFailure: null,
        logLevel: null,
        notes: [
          '--java is ignored: kcl-multilang needs no Java',
          '--jar-path is ignored: kcl-multilang needs no jars',
        ],
      },
    });
    expect(parseBootstrapArguments(['--properties', 'app.properties', '--java', 'java'])).toMatchObject({
      ok: true,
      value: { execute: false },
    });
  });

  it('requires -p', () => {
    expect(parseBootstrapArguments(['-e'])).toEqual({
      ok: false,
      problems: ['-p/--properties <file.properties> is required'],
    });
    expect(parseBootstrapArguments(['app.properties']).ok).toBe(false);
  });
});
