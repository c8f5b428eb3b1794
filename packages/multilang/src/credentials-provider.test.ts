import { describe, expect, it } from 'vitest';
import { resolveCredentialsProvider } from './credentials-provider.js';

const KEY = 'AwsCredentialsProvider';

describe('resolveCredentialsProvider', () => {
  it.each([
    'DefaultCredentialsProvider',
    'DefaultAWSCredentialsProviderChain',
    'software.amazon.awssdk.auth.credentials.DefaultCredentialsProvider',
    'com.amazonaws.auth.DefaultAWSCredentialsProviderChain',
  ])('maps %s to the AWS SDK default chain', (value) => {
    expect(resolveCredentialsProvider(KEY, value, {})).toEqual({
      source: { kind: 'default-chain', profile: null },
      problems: [],
      warnings: [],
    });
  });

  it('reads static keys from the environment for EnvironmentVariableCredentialsProvider', () => {
    expect(
      resolveCredentialsProvider(KEY, 'EnvironmentVariableCredentialsProvider', {
        AWS_ACCESS_KEY_ID: 'AKID',
        AWS_SECRET_ACCESS_KEY: 'secret',
        AWS_SESSION_TOKEN: 'token',
      }).source,
    ).toEqual({
      kind: 'static',
      origin: 'environment',
      accessKeyId: 'AKID',
      secretAccessKey: 'secret',
      sessionToken: 'token',
    });
    expect(resolveCredentialsProvider(KEY, 'EnvironmentVariableCredentialsProvider', {}).problems).toEqual([
      'AwsCredentialsProvider: EnvironmentVariableCredentialsProvider needs AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY in the environment',
    ]);
  });

  it('takes a profile name and static keys from the arguments', () => {
    expect(resolveCredentialsProvider(KEY, 'ProfileCredentialsProvider|analytics', {}).source).toEqual({
      kind: 'default-chain',
      profile: 'analytics',
    });
    expect(resolveCredentialsProvider(KEY, 'KclStaticCredentialsProvider|AKID|secret', {}).source).toEqual({
      kind: 'static',
      origin: 'properties',
      accessKeyId: 'AKID',
      secretAccessKey: 'secret',
      sessionToken: null,
    });
    expect(resolveCredentialsProvider(KEY, 'KclStaticCredentialsProvider|AKID', {}).problems).toHaveLength(1);
  });

  it('uses the first usable entry of a comma-separated chain', () => {
    expect(
      resolveCredentialsProvider(
        KEY,
        'EnvironmentVariableCredentialsProvider, ProfileCredentialsProvider|p',
        {},
      ).source,
    ).toEqual({
      kind: 'default-chain',
      profile: 'p',
    });
  });

  it('says that providers of the default chain are used through it', () => {
    const resolution = resolveCredentialsProvider(KEY, 'InstanceProfileCredentialsProvider', {});
    expect(resolution.source).toEqual({ kind: 'default-chain', profile: null });
    expect(resolution.warnings[0]).toContain(
      'InstanceProfileCredentialsProvider is used through the AWS SDK default chain',
    );
  });

  it('refuses providers it cannot honour instead of running as another identity', () => {
    expect(
      resolveCredentialsProvider(
        KEY,
        'KclStsAssumeRoleCredentialsProvider|arn:aws:iam::1:role/r|s|endpointRegion=us-east-1, DefaultCredentialsProvider',
        {},
      ),
    ).toMatchObject({
      source: null,
      problems: [
        expect.stringContaining('KclStsAssumeRoleCredentialsProvider is not supported by kcl-multilang'),
      ],
    });
    expect(resolveCredentialsProvider(KEY, 'com.example.MyProvider', {}).problems[0]).toContain(
      'unknown credentials provider "com.example.MyProvider"',
    );
  });
});
