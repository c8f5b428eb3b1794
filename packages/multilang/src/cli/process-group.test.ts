import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { describe, expect, it } from 'vitest';
import { signalProcessGroup } from './process-group.js';

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

describe('signalProcessGroup', () => {
  it('reaches the programs a child started, not only the child', async () => {
    // A wrapper (like `sh run.sh`) whose real worker is its own child, in the wrapper's group.
    const wrapper = spawn(
      process.execPath,
      [
        '-e',
        "const c = require('child_process').spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)'], { stdio: 'ignore' }); console.log(c.pid); setInterval(() => {}, 1000);",
      ],
      { detached: true, stdio: ['pipe', 'pipe', 'pipe'] },
    );
    const [chunk] = (await once(wrapper.stdout, 'data')) as [Buffer];
    const worker = Number(chunk.toString().trim());
    expect(alive(worker)).toBe(true);
    const exited = once(wrapper, 'exit');
    signalProcessGroup(wrapper, 'SIGTERM');
    expect(await exited).toEqual([null, 'SIGTERM']);
    for (let attempt = 0; attempt < 100 && alive(worker); attempt++)
      await new Promise((resolve) => setTimeout(resolve, 20));
    expect(alive(worker)).toBe(false);
  });
});
