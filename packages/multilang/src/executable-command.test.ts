import { chmodSync, mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { findOnPath, resolveExecutableCommand, splitExecutableName } from './executable-command.js';

describe('splitExecutableName', () => {
  it('splits on runs of spaces like the Java daemon, with no quoting', () => {
    expect(splitExecutableName('node  sample_kcl_app.js --flag')).toEqual({
      executable: 'node',
      args: ['sample_kcl_app.js', '--flag'],
      text: 'node  sample_kcl_app.js --flag',
    });
    expect(splitExecutableName('python3 "my app.py"')?.args).toEqual(['"my', 'app.py"']);
    expect(splitExecutableName('a\tb c')?.args).toEqual(['c']);
    expect(splitExecutableName('a\tb c')?.executable).toBe('a\tb');
    expect(splitExecutableName('   ')).toBeNull();
  });
});

describe('resolveExecutableCommand', () => {
  const directory = mkdtempSync(join(tmpdir(), 'kcl-executable-'));
  const bin = join(directory, 'bin');
  mkdirSync(bin);
  writeFileSync(join(bin, 'my-child'), '#!/bin/sh\n');
  chmodSync(join(bin, 'my-child'), 0o755);
  writeFileSync(join(bin, 'not-executable'), '');
  const appDirectory = join(directory, 'app');
  mkdirSync(appDirectory);
  writeFileSync(join(appDirectory, 'app.js'), '');
  const environment = { PATH: `/nonexistent:${bin}` };

  it('finds programs on PATH', () => {
    expect(findOnPath('my-child', environment)).toBe(join(bin, 'my-child'));
    expect(findOnPath('not-executable', environment)).toBeNull();
    const resolved = resolveExecutableCommand(
      { executable: 'my-child', args: ['x'], text: 'my-child x' },
      { workingDirectory: directory, environment },
    );
    expect(resolved.ok).toBe(true);
  });

  it('names a program that is not on PATH, or a path that is not executable', () => {
    const missing = resolveExecutableCommand(
      { executable: 'nodee', args: [], text: 'nodee app.js' },
      { workingDirectory: directory, environment },
    );
    expect(missing).toEqual({
      ok: false,
      problem:
        'executableName "nodee app.js": "nodee" was not found on PATH (install it, or give its full path)',
    });
    const notExecutable = resolveExecutableCommand(
      { executable: './bin/not-executable', args: [], text: './bin/not-executable' },
      { workingDirectory: directory, environment },
    );
    expect(notExecutable.ok).toBe(false);
  });

  it('resolves a script next to the properties file when it is not in the working directory', () => {
    const resolved = resolveExecutableCommand(
      {
        executable: 'my-child',
        args: ['app.js', '--verbose', 'missing.js'],
        text: 'my-child app.js --verbose missing.js',
      },
      { workingDirectory: directory, environment, propertiesDirectory: appDirectory },
    );
    expect(resolved.ok && resolved.resolved.command.args).toEqual([
      join(appDirectory, 'app.js'),
      '--verbose',
      'missing.js',
    ]);
    expect(resolved.ok && resolved.resolved.rewrittenArguments).toEqual([
      { from: 'app.js', to: join(appDirectory, 'app.js') },
    ]);
    // In the working directory itself nothing is rewritten.
    const inPlace = resolveExecutableCommand(
      { executable: 'my-child', args: ['app.js'], text: 'my-child app.js' },
      { workingDirectory: appDirectory, environment, propertiesDirectory: appDirectory },
    );
    expect(inPlace.ok && inPlace.resolved.command.args).toEqual(['app.js']);
  });
});
