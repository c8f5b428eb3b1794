import type { AttributeValue } from '@aws-sdk/client-dynamodb';

/** The parts of an UpdateItem: attributes to SET, to ADD to (numbers), and to REMOVE. */
export interface DynamoUpdate {
  readonly set?: Readonly<Record<string, AttributeValue>>;
  readonly add?: Readonly<Record<string, AttributeValue>>;
  readonly remove?: readonly string[];
}

/** A condition written with `#attributeName` placeholders and `:value` placeholders. */
export interface DynamoCondition {
  readonly expression: string;
  readonly values?: Readonly<Record<string, AttributeValue>>;
}

export interface DynamoExpressions {
  readonly UpdateExpression?: string;
  readonly ConditionExpression?: string;
  readonly KeyConditionExpression?: string;
  readonly ExpressionAttributeNames?: Record<string, string>;
  readonly ExpressionAttributeValues?: Record<string, AttributeValue>;
}

const NAME_PLACEHOLDER = /#([A-Za-z0-9_]+)/g;

/**
 * Builds expression strings with every attribute name behind a placeholder (`#checkpoint`), so no
 * name can clash with a DynamoDB reserved word. Attribute names here are plain identifiers, so the
 * placeholder is simply the name itself.
 */
export function buildExpressions(parts: {
  readonly update?: DynamoUpdate;
  readonly condition?: DynamoCondition;
  readonly keyCondition?: DynamoCondition;
}): DynamoExpressions {
  const values: Record<string, AttributeValue> = {};
  const clauses: string[] = [];
  const set = Object.entries(parts.update?.set ?? {});
  if (set.length > 0) {
    clauses.push(
      `SET ${set
        .map(([name, value]) => {
          values[`:set_${name}`] = value;
          return `#${name} = :set_${name}`;
        })
        .join(', ')}`,
    );
  }
  const add = Object.entries(parts.update?.add ?? {});
  if (add.length > 0) {
    clauses.push(
      `ADD ${add
        .map(([name, value]) => {
          values[`:add_${name}`] = value;
          return `#${name} :add_${name}`;
        })
        .join(', ')}`,
    );
  }
  const remove = parts.update?.remove ?? [];
  if (remove.length > 0) clauses.push(`REMOVE ${remove.map((name) => `#${name}`).join(', ')}`);
  Object.assign(values, parts.condition?.values ?? {}, parts.keyCondition?.values ?? {});

  const expressions: {
    UpdateExpression?: string;
    ConditionExpression?: string;
    KeyConditionExpression?: string;
  } = {};
  if (clauses.length > 0) expressions.UpdateExpression = clauses.join(' ');
  if (parts.condition !== undefined) expressions.ConditionExpression = parts.condition.expression;
  if (parts.keyCondition !== undefined) expressions.KeyConditionExpression = parts.keyCondition.expression;

  const names: Record<string, string> = {};
  for (const text of Object.values(expressions)) {
    for (const match of text.matchAll(NAME_PLACEHOLDER)) {
      names[match[0]] = match[1] as string;
    }
  }
  return {
    ...expressions,
    ...(Object.keys(names).length > 0 ? { ExpressionAttributeNames: names } : {}),
    ...(Object.keys(values).length > 0 ? { ExpressionAttributeValues: values } : {}),
  };
}
