#!/usr/bin/env node
import { MULTILANG_USAGE, parseMultiLangArguments } from '../cli-arguments.js';
import { packageVersion, runDaemon } from './run-daemon.js';

const parsed = parseMultiLangArguments(process.argv.slice(2));
if (!parsed.ok) {
  process.stderr.write(`kcl-multilang: ${parsed.problems.join('\n')}\n\n${MULTILANG_USAGE}\n`);
  process.exit(2);
}
const { value } = parsed;
if (value.command === 'help') {
  process.stdout.write(`${MULTILANG_USAGE}\n`);
  process.exit(0);
}
if (value.command === 'version') {
  process.stdout.write(`${packageVersion()}\n`);
  process.exit(0);
}
process.exit(await runDaemon({ ...value, propertiesFile: value.propertiesFile as string }));
