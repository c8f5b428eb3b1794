import { describe, expect, it } from 'vitest';
import { Cleanup } from './cleanup.js';

describe('Cleanup', () => {
  it('runs early tasks first, then the others latest first, each once, and goes on after a failure', async () => {
    const ran: string[] = [];
    const failures: string[] = [];
    const cleanup = new Cleanup((name) => failures.push(name));
    cleanup.add('directory', () => ran.push('directory'));
    cleanup.add('emulator', async () => {
      ran.push('emulator');
      throw new Error('already gone');
    });
    cleanup.add('workers', () => ran.push('workers'));
    cleanup.add('view', () => ran.push('view'), { early: true });
    await Promise.all([cleanup.run(), cleanup.run()]);
    await cleanup.run();
    expect(ran).toEqual(['view', 'workers', 'emulator', 'directory']);
    expect(failures).toEqual(['emulator']);
  });
});
