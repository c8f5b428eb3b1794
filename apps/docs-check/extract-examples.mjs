// Extracts every ```ts code block of the READMEs into generated/*.ts so `tsc` type-checks them against
// the workspace packages, as a reader would paste them. A block whose first line is `// not checked`
// is skipped (for fragments that cannot stand alone; keep them rare).
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, '..', '..');
const out = join(here, 'generated');
rmSync(out, { recursive: true, force: true });
mkdirSync(out, { recursive: true });

const readmes = [join(root, 'README.md')];
for (const folder of ['packages', 'apps']) {
  for (const name of readdirSync(join(root, folder))) {
    const file = join(root, folder, name, 'README.md');
    if (existsSync(file)) readmes.push(file);
  }
  for (const name of readdirSync(join(root, folder))) {
    const docs = join(root, folder, name, 'docs');
    if (!existsSync(docs)) continue;
    for (const doc of readdirSync(docs)) if (doc.endsWith('.md')) readmes.push(join(docs, doc));
  }
}

let count = 0;
for (const file of readmes) {
  const text = readFileSync(file, 'utf8');
  const blocks = [...text.matchAll(/```(?:ts|typescript)\n([\s\S]*?)```/g)];
  blocks.forEach((match, index) => {
    const code = match[1] ?? '';
    if (code.trimStart().startsWith('// not checked')) return;
    const name = relative(root, file)
      .replace(/[^A-Za-z0-9]+/g, '-')
      .replace(/-md$/, '');
    const line = text.slice(0, match.index).split('\n').length;
    writeFileSync(
      join(out, `${name}-${index + 1}.ts`),
      `// ${relative(root, file)}:${line}\n${code}\nexport {};\n`,
    );
    count += 1;
  });
}
console.log(`docs-check: ${count} TypeScript examples from ${readmes.length} markdown files`);
