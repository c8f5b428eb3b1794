import { describe, expect, it } from 'vitest';
import {
  createClientForEndpoint,
  isLoopbackEndpoint,
  kinesisHttpVersion,
  PLACEHOLDER_CREDENTIALS,
} from './aws-clients.js';
import type { CredentialsSource } from './credentials-provider.js';

describe('isLoopbackEndpoint', () => {
  it.each([
    ['http://127.0.0.1:4567', true],
    ['http://localhost:4566', true],
    ['https://kinesis.localhost', true],
    ['http://[::1]:4567', true],
    ['http://127.1.2.3:80', true],
    ['https://kinesis.us-east-1.amazonaws.com', false],
    ['https://vpce-123.kinesis.us-east-1.vpce.amazonaws.com', false],
    ['http://10.0.0.5:4567', false],
  ])('%s → %s', (endpoint, expected) => {
    expect(isLoopbackEndpoint(endpoint)).toBe(expected);
  });

  it('is false without an endpoint', () => {
    expect(isLoopbackEndpoint(null)).toBe(false);
  });
});

describe('kinesisHttpVersion', () => {
  it.each([
    ['polling', null, '1.1'],
    ['polling', 'https://kinesis.eu-west-1.amazonaws.com', '1.1'],
    // SubscribeToShard on AWS needs HTTP/2…
    ['fanout', null, '2'],
    ['fanout', 'https://kinesis.eu-west-1.amazonaws.com', '2'],
    ['fanout', 'https://vpce-123.kinesis.us-east-1.vpce.amazonaws.com', '2'],
    // …and kinesis-local serves it over HTTP/1.1 only.
    ['fanout', 'http://127.0.0.1:4567', '1.1'],
    ['fanout', 'https://localhost:4568', '1.1'],
    ['fanout', 'http://kinesis-local:4567', '1.1'],
  ] as const)('%s against %s → HTTP/%s', (retrieval, endpoint, expected) => {
    expect(kinesisHttpVersion(retrieval, endpoint)).toBe(expected);
  });
});

describe('createClientForEndpoint', () => {
  /** A stand-in for an SDK client whose credential chain finds nothing unless it was given keys. */
  const make = (credentials: CredentialsSource) => ({
    credentials,
    destroyed: false,
    config: {
      credentials: async () => {
        if (credentials.kind === 'default-chain')
          throw new Error('Could not load credentials from any providers');
        return credentials;
      },
    },
    destroy() {
      this.destroyed = true;
    },
  });
  const defaultChain: CredentialsSource = { kind: 'default-chain', profile: null };

  it('uses placeholder credentials only for a local endpoint whose default chain finds none', async () => {
    let told = 0;
    const local = await createClientForEndpoint(make, defaultChain, 'http://127.0.0.1:4567', () => told++);
    expect(local.credentials).toBe(PLACEHOLDER_CREDENTIALS);
    expect(told).toBe(1);
    const remote = await createClientForEndpoint(
      make,
      defaultChain,
      'https://kinesis.eu-west-1.amazonaws.com',
      () => told++,
    );
    expect(remote.credentials).toBe(defaultChain);
    const aws = await createClientForEndpoint(make, defaultChain, null, () => told++);
    expect(aws.credentials).toBe(defaultChain);
    expect(told).toBe(1);
  });

  it('keeps credentials that were given explicitly', async () => {
    const explicit: CredentialsSource = {
      kind: 'static',
      origin: 'environment',
      accessKeyId: 'a',
      secretAccessKey: 'b',
      sessionToken: null,
    };
    const client = await createClientForEndpoint(make, explicit, 'http://localhost:4567', () => {
      throw new Error('not expected');
    });
    expect(client.credentials).toBe(explicit);
  });
});
