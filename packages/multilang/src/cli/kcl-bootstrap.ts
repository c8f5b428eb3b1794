#!/usr/bin/env node
import { BOOTSTRAP_USAGE, parseBootstrapArguments } from '../cli-arguments.js';
import { runDaemon } from './run-daemon.js';

const parsed = parseBootstrapArguments(process.argv.slice(2));
if (!parsed.ok) {
  process.stderr.write(`kcl-bootstrap: ${parsed.problems.join('\n')}\n\n${BOOTSTRAP_USAGE}\n`);
  process.exit(2);
}
const { value } = parsed;
if (value.command === 'help') {
  process.stdout.write(`${BOOTSTRAP_USAGE}\n`);
  process.exit(0);
}
const propertiesFile = value.propertiesFile as string;
for (const note of value.notes) process.stderr.write(`kcl-bootstrap: ${note}\n`);
if (!value.execute) {
  // As aws-kcl's kcl-bootstrap: without -e, show the command instead of running it.
  const command = ['kcl-multilang', '--properties', propertiesFile];
  if (value.exitOnChildFailure === true) command.push('--exit-on-child-failure');
  if (value.logLevel !== null) command.push('--log-level', value.logLevel);
  console.log('==========================================================');
  console.log(command.join(' '));
  console.log('==========================================================');
  console.log('Run with -e to start the application.');
  process.exit(0);
}
process.exit(await runDaemon({ ...value, notes: [], propertiesFile }));
