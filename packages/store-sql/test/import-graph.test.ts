import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const SOURCE = fileURLToPath(new URL('../src', import.meta.url));

/** Every `.ts` file under `directory`. */
function sourceFiles(directory: string): string[] {
  return readdirSync(directory, { withFileTypes: true }).flatMap((entry) => {
    const path = join(directory, entry.name);
    if (entry.isDirectory()) return sourceFiles(path);
    return entry.name.endsWith('.ts') ? [path] : [];
  });
}

/** The package files `file` imports, type-only imports included (a circle of types is still a circle). */
function relativeImports(file: string): string[] {
  const text = readFileSync(file, 'utf8');
  const specifiers = [
    ...text.matchAll(/\bfrom\s+'(\.{1,2}\/[^']+)'/g),
    ...text.matchAll(/\bimport\(\s*'(\.{1,2}\/[^']+)'\s*\)/g),
  ].map((match) => match[1] as string);
  return [
    ...new Set(specifiers.map((specifier) => resolve(dirname(file), specifier.replace(/\.js$/, '.ts')))),
  ];
}

/** The import circles of `graph` (file → files it imports), each as the files around it. */
function importCircles(graph: ReadonlyMap<string, readonly string[]>): string[][] {
  const circles: string[][] = [];
  const state = new Map<string, 'visiting' | 'done'>();
  const path: string[] = [];
  const visit = (file: string): void => {
    state.set(file, 'visiting');
    path.push(file);
    for (const next of graph.get(file) ?? []) {
      if (state.get(next) === 'visiting') circles.push([...path.slice(path.indexOf(next)), next]);
      else if (state.get(next) === undefined && graph.has(next)) visit(next);
    }
    path.pop();
    state.set(file, 'done');
  };
  for (const file of graph.keys()) if (state.get(file) === undefined) visit(file);
  return circles;
}

describe('the import graph of src', () => {
  it('has no circles', () => {
    const files = sourceFiles(SOURCE).filter((file) => !file.endsWith('.test.ts'));
    const graph = new Map(
      files.map((file) => [
        relative(SOURCE, file),
        relativeImports(file).map((imported) => relative(SOURCE, imported)),
      ]),
    );
    expect(graph.size).toBeGreaterThan(10);
    expect([...graph.values()].flat().length).toBeGreaterThan(10);
    expect(importCircles(graph)).toEqual([]);
  });

  it('finds a circle, also one through a file reached twice', () => {
    const graph = new Map([
      ['index.ts', ['a.ts', 'c.ts']],
      ['a.ts', ['b.ts']],
      ['b.ts', ['c.ts']],
      ['c.ts', ['a.ts']],
    ]);
    expect(importCircles(graph)).toEqual([['a.ts', 'b.ts', 'c.ts', 'a.ts']]);
    expect(
      importCircles(
        new Map([
          ['a.ts', ['b.ts']],
          ['b.ts', []],
        ]),
      ),
    ).toEqual([]);
  });
});
