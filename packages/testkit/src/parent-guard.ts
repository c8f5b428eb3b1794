// Runs a Node.js script (the first argument) in this process, and ends this process when the parent
// that started it goes away. The parent holds the write end of this process's stdin; the kernel closes
// it when the parent exits in any way, kill -9 included, and stdin then ends here.
import { pathToFileURL } from 'node:url';

const script = process.argv[2];
if (script === undefined) {
  process.stderr.write('usage: parent-guard <script> [args...]\n');
  process.exit(2);
}
process.argv.splice(2, 1);
process.stdin.on('end', () => process.exit(0));
process.stdin.resume();
await import(pathToFileURL(script).href);
