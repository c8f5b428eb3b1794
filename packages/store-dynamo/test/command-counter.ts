import type { DynamoDBClient, UpdateItemCommandInput } from '@aws-sdk/client-dynamodb';
import { GetItemCommand } from '@aws-sdk/client-dynamodb';

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

/**
 * Gives a failed conditional UpdateItem the item it failed on, as DynamoDB does with
 * `ReturnValuesOnConditionCheckFailure: ALL_OLD` and dynalite does not, so tests reach the store's
 * path for real DynamoDB. The item is read right after the failure: use it where nothing else writes.
 */
export function returnItemOnConditionFailure(client: DynamoDBClient): void {
  client.middlewareStack.add(
    (next, context) => async (args) => {
      try {
        return await next(args);
      } catch (error) {
        const input = args.input as UpdateItemCommandInput;
        if (
          context.commandName === 'UpdateItemCommand' &&
          (error as { name?: string }).name === 'ConditionalCheckFailedException' &&
          input.ReturnValuesOnConditionCheckFailure === 'ALL_OLD'
        ) {
          const output = await client.send(
            new GetItemCommand({ TableName: input.TableName, Key: input.Key, ConsistentRead: true }),
          );
          if (output.Item !== undefined) Object.assign(error as object, { Item: output.Item });
        }
        throw error;
      }
    },
    { step: 'initialize', name: 'kclConditionFailureItem' },
  );
}
