import { describe, expect, it } from 'vitest';
import { buildExpressions } from './dynamo-expression.js';

describe('buildExpressions', () => {
  it('puts every attribute name behind a placeholder and collects the values', () => {
    expect(
      buildExpressions({
        update: {
          set: { leaseOwner: { S: 'w' }, leaseCounter: { N: '4' } },
          add: { ownerSwitchesSinceCheckpoint: { N: '1' } },
          remove: ['checkpointOwner'],
        },
        condition: { expression: '#leaseCounter = :expected', values: { ':expected': { N: '3' } } },
      }),
    ).toEqual({
      UpdateExpression:
        'SET #leaseOwner = :set_leaseOwner, #leaseCounter = :set_leaseCounter ADD #ownerSwitchesSinceCheckpoint :add_ownerSwitchesSinceCheckpoint REMOVE #checkpointOwner',
      ConditionExpression: '#leaseCounter = :expected',
      ExpressionAttributeNames: {
        '#leaseOwner': 'leaseOwner',
        '#leaseCounter': 'leaseCounter',
        '#ownerSwitchesSinceCheckpoint': 'ownerSwitchesSinceCheckpoint',
        '#checkpointOwner': 'checkpointOwner',
      },
      ExpressionAttributeValues: {
        ':set_leaseOwner': { S: 'w' },
        ':set_leaseCounter': { N: '4' },
        ':add_ownerSwitchesSinceCheckpoint': { N: '1' },
        ':expected': { N: '3' },
      },
    });
  });

  it('leaves out empty parts (DynamoDB rejects empty name or value maps)', () => {
    expect(buildExpressions({ condition: { expression: 'attribute_not_exists(#leaseKey)' } })).toEqual({
      ConditionExpression: 'attribute_not_exists(#leaseKey)',
      ExpressionAttributeNames: { '#leaseKey': 'leaseKey' },
    });
  });
});
