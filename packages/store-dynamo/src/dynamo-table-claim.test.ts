import { describe, expect, it } from 'vitest';
import { tableClaimedError, tableOwnerTagValue } from './dynamo-table-claim.js';

describe('tableOwnerTagValue', () => {
  it.each(['billing', 'orders-app.v2', 'team/billing:eu@prod', 'Zürich billing', 'a'.repeat(256)])(
    'keeps a name DynamoDB accepts as a tag value: %s',
    (name) => {
      expect(tableOwnerTagValue(name)).toBe(name);
    },
  );

  it.each([`it's "billing"`, 'billing#eu', 'shard ✓', '', 'a'.repeat(257), 'sha256:looks-like-a-hash'])(
    'hashes a name DynamoDB refuses as a tag value (or one that looks hashed): %j',
    (name) => {
      const value = tableOwnerTagValue(name);
      expect(value).toMatch(/^sha256:[0-9a-f]{64}$/);
      expect(tableOwnerTagValue(name)).toBe(value);
    },
  );

  it('tells names apart that only differ in characters a tag cannot hold', () => {
    expect(tableOwnerTagValue('billing#eu')).not.toBe(tableOwnerTagValue('billing%eu'));
  });
});

describe('tableClaimedError', () => {
  it('names the owner, the refused application, where the claim is kept and the fix', () => {
    const error = tableClaimedError('orders', 'billing', 'search', "the table's kcl:application tag");
    expect([error.code, error.retryable]).toEqual(['CONFIGURATION', false]);
    expect(error.message).toBe(
      `@kcl/store-dynamo: lease table "orders" already holds the leases of application "billing", not "search" (recorded in the table's kcl:application tag). In the Java-compatible layout a table belongs to one application (its default name is the application name): drop the tableName option, or use layout: 'shared' to keep several applications in one table. If that application has left the table for good, remove its claim as the @kcl/store-dynamo README describes.`,
    );
  });

  it('shows a hashed owner as the tag value', () => {
    const owner = tableOwnerTagValue('billing#eu');
    expect(tableClaimedError('orders', owner, 'search', 'the tag').message).toContain(
      `already holds the leases of another application (tag kcl:application = "${owner}"), not "search"`,
    );
  });
});
