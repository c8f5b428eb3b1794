import { createHash } from 'node:crypto';
import type { DynamoDBClient, Tag } from '@aws-sdk/client-dynamodb';
import { ListTagsOfResourceCommand, TagResourceCommand } from '@aws-sdk/client-dynamodb';
import type { Logger } from '@kcl/core';
import { LeaseStoreError } from '@kcl/core';
import { mapDynamoError, sendOptions } from './dynamo-error-mapping.js';
import type { DynamoTableBilling } from './dynamo-lease-store-options.js';
import { PACKAGE_NAME } from './dynamo-lease-store-options.js';
import type { DynamoTableDefinition } from './dynamo-table-schema.js';

/**
 * The tag of a Java-layout lease table that names the application owning it. The worker registry
 * records the claim too, but two applications may keep their workers in different registry tables;
 * the lease table is the one thing they share, and a tag is the only record on it that a Java KCL
 * worker never reads (an item would be read as a lease).
 */
export const TABLE_OWNER_TAG = 'kcl:application';

/** DynamoDB tag values: at most 256 Unicode letters, digits, spaces and `_ . : / = + - @`. */
const TAG_VALUE = /^[\p{L}\p{N} _.:/=+\-@]{1,256}$/u;
const HASHED_PREFIX = 'sha256:';

/**
 * The tag value naming an application: its name where DynamoDB allows it as a tag value, else a
 * SHA-256 of the name (application names may hold any character and be 2 KB long).
 */
export function tableOwnerTagValue(applicationName: string): string {
  if (TAG_VALUE.test(applicationName) && !applicationName.startsWith(HASHED_PREFIX)) return applicationName;
  return `${HASHED_PREFIX}${createHash('sha256').update(applicationName, 'utf8').digest('hex')}`;
}

/** The error when another application already owns a Java-layout lease table. */
export function tableClaimedError(
  leaseTableName: string,
  owner: string,
  applicationName: string,
  recordedIn: string,
): LeaseStoreError {
  const ownerText = owner.startsWith(HASHED_PREFIX)
    ? `another application (tag ${TABLE_OWNER_TAG} = ${JSON.stringify(owner)})`
    : `application ${JSON.stringify(owner)}`;
  return new LeaseStoreError(
    PACKAGE_NAME,
    `${PACKAGE_NAME}: lease table ${JSON.stringify(leaseTableName)} already holds the leases of ${ownerText}, not ${JSON.stringify(applicationName)} (recorded in ${recordedIn}). In the Java-compatible layout a table belongs to one application (its default name is the application name): drop the tableName option, or use layout: 'shared' to keep several applications in one table. If that application has left the table for good, remove its claim as the @kcl/store-dynamo README describes.`,
    { retryable: false, code: 'CONFIGURATION' },
  );
}

export interface LeaseTableTagClaimOptions {
  readonly client: DynamoDBClient;
  readonly definition: DynamoTableDefinition;
  readonly billing: DynamoTableBilling;
  /** From DescribeTable; without it the tag cannot be read. */
  readonly tableArn: string | undefined;
  readonly applicationName: string;
  readonly logger: Logger;
  readonly signal?: AbortSignal | undefined;
}

/**
 * Records the application in the lease table's `kcl:application` tag, or refuses when the tag names
 * another application. Tags cannot be written conditionally, so after tagging it reads the tag back:
 * of two applications tagging at once, the one whose tag was overwritten learns it here (or, since
 * tags are eventually consistent, at its next start). A tag that cannot be read or written (no
 * permission, an emulator without tags, throttling) is logged and the claim rests on the registry:
 * a best-effort check must not stop a worker.
 */
export async function claimLeaseTableTag(options: LeaseTableTagClaimOptions): Promise<void> {
  const { client, definition, billing, tableArn, applicationName, logger, signal } = options;
  const tableName = definition.tableName;
  const unchecked = (why: string, error?: unknown): void => {
    logger.warn(
      `${PACKAGE_NAME}: could not check which application owns lease table ${JSON.stringify(tableName)} through its ${TABLE_OWNER_TAG} tag (${why}); another application on this table with a different worker table would go unnoticed. Grant dynamodb:ListTagsOfResource and dynamodb:TagResource on the table.`,
      error === undefined ? { table: tableName } : { table: tableName, error },
    );
  };
  if (tableArn === undefined) {
    unchecked('DescribeTable returned no TableArn');
    return;
  }
  const ours = tableOwnerTagValue(applicationName);
  const readOwner = async (): Promise<string | undefined> => {
    let nextToken: string | undefined;
    do {
      const output = await client.send(
        new ListTagsOfResourceCommand({
          ResourceArn: tableArn,
          ...(nextToken === undefined ? {} : { NextToken: nextToken }),
        }),
        sendOptions(signal),
      );
      const found = (output.Tags ?? []).find((tag: Tag) => tag.Key === TABLE_OWNER_TAG);
      if (found !== undefined) return found.Value ?? '';
      nextToken = output.NextToken;
    } while (nextToken !== undefined);
    return undefined;
  };
  const describe = (error: unknown, operation: string): Error =>
    mapDynamoError(error, { operation, table: definition, billing, signal });

  let owner: string | undefined;
  try {
    owner = await readOwner();
  } catch (error) {
    // An aborted call is the caller's decision, not a tag that cannot be read.
    if (signal?.aborted === true) throw describe(error, 'ListTagsOfResource');
    unchecked('ListTagsOfResource failed', describe(error, 'ListTagsOfResource'));
    return;
  }
  if (owner === undefined) {
    try {
      await client.send(
        new TagResourceCommand({ ResourceArn: tableArn, Tags: [{ Key: TABLE_OWNER_TAG, Value: ours }] }),
        sendOptions(signal),
      );
      owner = await readOwner();
    } catch (error) {
      if (signal?.aborted === true) throw describe(error, 'TagResource');
      unchecked('TagResource failed', describe(error, 'TagResource'));
      return;
    }
  }
  if (owner !== undefined && owner !== ours) {
    throw tableClaimedError(tableName, owner, applicationName, `the table's ${TABLE_OWNER_TAG} tag`);
  }
}
