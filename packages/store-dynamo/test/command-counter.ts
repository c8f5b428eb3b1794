import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';

/** Counts the commands a client sends, by command name (e.g. `ScanCommand`). */
export function countCommands(client: DynamoDBClient): Map<string, number> {
  const counts = new Map<string, number>();
  client.middlewareStack.add(
    (next, context) => async (args) => {
      const name = String(context.commandName);
      counts.set(name, (counts.get(name) ?? 0) + 1);
      return next(args);
    },
    { step: 'initialize', name: 'kclCommandCounter' },
  );
  return counts;
}

/** Makes every command of the given names fail with `error()` before it is sent. */
export function failCommands(client: DynamoDBClient, names: readonly string[], error: () => Error): void {
  client.middlewareStack.add(
    (next, context) => async (args) => {
      if (names.includes(String(context.commandName))) throw error();
      return next(args);
    },
    { step: 'initialize', name: 'kclCommandFailure' },
  );
}

/**
 * Makes the next `times` commands that `matches` accepts fail with `error()` before they are sent, as
 * DynamoDB throttling one request among many would.
 */
export function failCommandsWhere(
  client: DynamoDBClient,
  matches: (commandName: string, input: Record<string, unknown>) => boolean,
  error: () => Error,
  times = 1,
): void {
  let remaining = times;
  client.middlewareStack.add(
    (next, context) => async (args) => {
      if (remaining > 0 && matches(String(context.commandName), args.input as Record<string, unknown>)) {
        remaining -= 1;
        throw error();
      }
      return next(args);
    },
    { step: 'initialize', name: 'kclMatchingCommandFailure' },
  );
}
