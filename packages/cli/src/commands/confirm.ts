import { askYesNo } from '../cli/cli-io.js';
import type { CommandContext } from '../cli/command-context.js';
import { OperationRefusedError } from '../cli/operation-refused-error.js';

/**
 * Goes on when `--yes` was given or the person at the terminal says yes; refuses otherwise. (Not on a
 * terminal without `--yes` was already reported as a usage error, before anything was read.)
 */
export async function confirm(context: CommandContext, operation: string, question: string): Promise<void> {
  if (context.raw.yes === true) return;
  if (!(await askYesNo(context.io, question))) {
    throw new OperationRefusedError(operation, ['not confirmed: nothing was written']);
  }
}
