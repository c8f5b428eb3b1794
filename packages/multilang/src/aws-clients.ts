import { CloudWatchClient, type CloudWatchClientConfig } from '@aws-sdk/client-cloudwatch';
import { DynamoDBClient, type DynamoDBClientConfig } from '@aws-sdk/client-dynamodb';
import { KinesisClient, type KinesisClientConfig } from '@aws-sdk/client-kinesis';
import { ConfigurationError } from '@kcl/core';
import { NodeHttp2Handler, NodeHttpHandler } from '@smithy/node-http-handler';
import type { CredentialsSource } from './credentials-provider.js';

export interface AwsClientSettings {
  readonly region: string | null;
  readonly endpoint: string | null;
  readonly credentials: CredentialsSource;
}

/** The client settings every source maps to: static keys, or the default chain (with a profile). */
function credentialSettings(source: CredentialsSource): Pick<KinesisClientConfig, 'credentials' | 'profile'> {
  if (source.kind === 'static') {
    return {
      credentials: {
        accessKeyId: source.accessKeyId,
        secretAccessKey: source.secretAccessKey,
        ...(source.sessionToken === null ? {} : { sessionToken: source.sessionToken }),
      },
    };
  }
  return source.profile === null ? {} : { profile: source.profile };
}

/**
 * The HTTP version of the Kinesis client. Polling needs nothing more than HTTP/1.1. SubscribeToShard
 * (fan-out) is only supported over HTTP/2 on AWS — the AWS SDK's default for Kinesis and what the Java
 * KCL uses — while kinesis-local serves it over HTTP/1.1 only (TOOLCHAIN §8) and kinesalite speaks
 * nothing else; so HTTP/2 for fan-out, except against a plain `http://` endpoint or one on this machine.
 */
export function kinesisHttpVersion(retrieval: 'polling' | 'fanout', endpoint: string | null): '1.1' | '2' {
  if (retrieval === 'polling') return '1.1';
  if (endpoint === null) return '2';
  return endpoint.startsWith('http:') || isLoopbackEndpoint(endpoint) ? '1.1' : '2';
}

/**
 * The Kinesis client, on HTTP/1.1 (`NodeHttpHandler`) or HTTP/2 (see `kinesisHttpVersion`). The
 * request timeout is an inactivity timeout, so a subscription that receives an event every few
 * seconds is not cut by it.
 */
export function createKinesisClient(
  settings: AwsClientSettings & { readonly httpVersion?: '1.1' | '2' },
): KinesisClient {
  const config: KinesisClientConfig = {
    ...credentialSettings(settings.credentials),
    ...(settings.region === null ? {} : { region: settings.region }),
    ...(settings.endpoint === null ? {} : { endpoint: settings.endpoint }),
    requestHandler:
      settings.httpVersion === '2'
        ? new NodeHttp2Handler({ requestTimeout: 30_000 })
        : new NodeHttpHandler({ connectionTimeout: 10_000, requestTimeout: 30_000 }),
  };
  return new KinesisClient(config);
}

/** The DynamoDB client of the lease store, with a request timeout so a hung call cannot stall renewals. */
export function createDynamoClient(settings: AwsClientSettings): DynamoDBClient {
  const config: DynamoDBClientConfig = {
    ...credentialSettings(settings.credentials),
    ...(settings.region === null ? {} : { region: settings.region }),
    ...(settings.endpoint === null ? {} : { endpoint: settings.endpoint }),
    requestHandler: new NodeHttpHandler({ connectionTimeout: 10_000, requestTimeout: 10_000 }),
  };
  return new DynamoDBClient(config);
}

/** The CloudWatch client of the metrics sink (there is no endpoint override, as in the Java daemon). */
export function createCloudWatchClient(settings: Omit<AwsClientSettings, 'endpoint'>): CloudWatchClient {
  const config: CloudWatchClientConfig = {
    ...credentialSettings(settings.credentials),
    ...(settings.region === null ? {} : { region: settings.region }),
    requestHandler: new NodeHttpHandler({ connectionTimeout: 10_000, requestTimeout: 30_000 }),
  };
  return new CloudWatchClient(config);
}

/** What local emulators accept: they check that a request is signed, not by whom. */
export const PLACEHOLDER_CREDENTIALS: CredentialsSource = {
  kind: 'static',
  origin: 'properties',
  accessKeyId: 'AKIAKCLLOCALPLACEHOLDER',
  secretAccessKey: 'kcl-local-placeholder',
  sessionToken: null,
};

/** True for an endpoint on this machine (`localhost`, `127.0.0.1`, `::1`): never AWS itself. */
export function isLoopbackEndpoint(endpoint: string | null): boolean {
  if (endpoint === null) return false;
  try {
    const host = new URL(endpoint).hostname.replace(/^\[|\]$/g, '');
    return (
      host === 'localhost' ||
      host.endsWith('.localhost') ||
      host === '::1' ||
      /^127(\.\d{1,3}){3}$/.test(host)
    );
  } catch {
    return false;
  }
}

/**
 * Builds a client; when it would use the default chain against an emulator on this machine and the
 * chain finds no credentials, builds it again with placeholder credentials instead (reported through
 * `onPlaceholder`), so a local try-out needs no AWS keys.
 */
export async function createClientForEndpoint<
  T extends { readonly config: { credentials: () => Promise<unknown> }; destroy(): void },
>(
  make: (credentials: CredentialsSource) => T,
  source: CredentialsSource,
  endpoint: string | null,
  onPlaceholder: () => void,
): Promise<T> {
  const client = make(source);
  if (source.kind !== 'default-chain' || !isLoopbackEndpoint(endpoint)) return client;
  try {
    await client.config.credentials();
    return client;
  } catch {
    client.destroy();
    onPlaceholder();
    return make(PLACEHOLDER_CREDENTIALS);
  }
}

/** Checks that a client has a region (from `regionName`, `AWS_REGION` or the profile). */
export async function requireRegion(client: {
  readonly config: { region: () => Promise<string> };
}): Promise<void> {
  try {
    await client.config.region();
  } catch (error) {
    throw new ConfigurationError('@kcl/multilang (properties)', [
      `no AWS region: set regionName, or AWS_REGION in the environment (${error instanceof Error ? error.message : String(error)})`,
    ]);
  }
}
