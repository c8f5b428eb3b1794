import type { ExecutableCommand } from '../../src/executable-command.js';

/** A child written inline: `send(object)` writes a protocol line, `lines` yields what the daemon sent. */
export function nodeChild(body: string): ExecutableCommand {
  const code = `
    const readline = require('readline');
    const input = readline.createInterface({ input: process.stdin });
    const send = (message) => process.stdout.write('\\n' + JSON.stringify(message) + '\\n');
    const queue = []; const waiters = [];
    input.on('line', (line) => { const w = waiters.shift(); if (w) w(line); else queue.push(line); });
    input.on('close', () => { const w = waiters.shift(); if (w) w(null); else queue.push(null); });
    const next = () => queue.length ? Promise.resolve(queue.shift()) : new Promise((r) => waiters.push(r));
    (async () => { ${body} })();
  `;
  return { executable: process.execPath, args: ['-e', code], text: 'node -e <script>' };
}
