/** Where an AWS client gets its credentials from. */
export type CredentialsSource =
  /** The AWS SDK's default provider chain (environment, profile, web identity, container, instance). */
  | { readonly kind: 'default-chain'; readonly profile: string | null }
  /** Fixed keys, read once at start. */
  | {
      readonly kind: 'static';
      readonly origin: 'environment' | 'properties';
      readonly accessKeyId: string;
      readonly secretAccessKey: string;
      readonly sessionToken: string | null;
    };

export interface CredentialsResolution {
  readonly source: CredentialsSource | null;
  readonly problems: readonly string[];
  readonly warnings: readonly string[];
}

export const DEFAULT_CREDENTIALS: CredentialsSource = { kind: 'default-chain', profile: null };

/** Java provider names (v1 and v2 SDK) that are, or are part of, the AWS SDK default chain. */
const DEFAULT_CHAIN_NAMES = new Set(['DefaultCredentialsProvider', 'DefaultAWSCredentialsProviderChain']);
const IN_DEFAULT_CHAIN_NAMES = new Set([
  'ContainerCredentialsProvider',
  'InstanceProfileCredentialsProvider',
  'EC2ContainerCredentialsProviderWrapper',
  'WebIdentityTokenFileCredentialsProvider',
  'WebIdentityTokenCredentialsProvider',
]);
const ENVIRONMENT_NAMES = new Set(['EnvironmentVariableCredentialsProvider']);
const PROFILE_NAMES = new Set(['ProfileCredentialsProvider']);
const STATIC_NAMES = new Set(['KclStaticCredentialsProvider']);
const UNSUPPORTED: Readonly<Record<string, string>> = {
  StsAssumeRoleCredentialsProvider:
    'assuming a role is not built in: use a profile with role_arn and source_profile (ProfileCredentialsProvider|<profile>) or AWS_ROLE_ARN with AWS_WEB_IDENTITY_TOKEN_FILE and DefaultCredentialsProvider',
  KclStsAssumeRoleCredentialsProvider:
    'assuming a role is not built in: use a profile with role_arn and source_profile (ProfileCredentialsProvider|<profile>) or AWS_ROLE_ARN with AWS_WEB_IDENTITY_TOKEN_FILE and DefaultCredentialsProvider',
  STSAssumeRoleSessionCredentialsProvider:
    'assuming a role is not built in: use a profile with role_arn and source_profile (ProfileCredentialsProvider|<profile>)',
  KclSTSAssumeRoleSessionCredentialsProvider:
    'assuming a role is not built in: use a profile with role_arn and source_profile (ProfileCredentialsProvider|<profile>)',
  SystemPropertyCredentialsProvider:
    'there are no Java system properties here: use EnvironmentVariableCredentialsProvider (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY)',
  SystemPropertiesCredentialsProvider:
    'there are no Java system properties here: use EnvironmentVariableCredentialsProvider (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY)',
  AnonymousCredentialsProvider: 'unsigned requests are not supported by Kinesis or DynamoDB',
  StaticCredentialsProvider:
    'give the keys as KclStaticCredentialsProvider|<accessKeyId>|<secretAccessKey>[|<sessionToken>], or in the environment with EnvironmentVariableCredentialsProvider',
  ProcessCredentialsProvider: 'use a profile with credential_process (ProfileCredentialsProvider|<profile>)',
};

/**
 * Reads an `AwsCredentialsProvider` value: `Provider[|arg…]`, several separated by commas (a chain,
 * tried in order), each a short or fully qualified Java class name. The supported providers map onto
 * the AWS SDK for JavaScript; an unsupported one is a problem (never silently replaced by other
 * credentials, which would run the daemon as another identity).
 */
export function resolveCredentialsProvider(
  key: string,
  value: string,
  environment: Readonly<Record<string, string | undefined>>,
): CredentialsResolution {
  const problems: string[] = [];
  const warnings: string[] = [];
  const candidates: CredentialsSource[] = [];
  let environmentWithoutKeys = false;

  const elements = value
    .split(',')
    .map((element) => element.trim())
    .filter((element) => element !== '');
  if (elements.length === 0) {
    return {
      source: null,
      problems: [`${key} is empty: name a credentials provider, e.g. DefaultCredentialsProvider`],
      warnings,
    };
  }

  for (const element of elements) {
    const [qualifiedName = '', ...args] = element.split('|');
    const name = qualifiedName.slice(qualifiedName.lastIndexOf('.') + 1);
    const positional = args.filter((arg) => !arg.includes('='));
    if (DEFAULT_CHAIN_NAMES.has(name)) {
      candidates.push(DEFAULT_CREDENTIALS);
    } else if (IN_DEFAULT_CHAIN_NAMES.has(name)) {
      warnings.push(
        `${key}: ${name} is used through the AWS SDK default chain, which tries environment variables, the shared config files, web identity, container and instance credentials in that order`,
      );
      candidates.push(DEFAULT_CREDENTIALS);
    } else if (PROFILE_NAMES.has(name)) {
      const profile = positional[0]?.trim();
      candidates.push({
        kind: 'default-chain',
        profile: profile === undefined || profile === '' ? null : profile,
      });
    } else if (ENVIRONMENT_NAMES.has(name)) {
      const accessKeyId = environment.AWS_ACCESS_KEY_ID ?? environment.AWS_ACCESS_KEY;
      const secretAccessKey = environment.AWS_SECRET_ACCESS_KEY ?? environment.AWS_SECRET_KEY;
      if (accessKeyId && secretAccessKey) {
        const sessionToken = environment.AWS_SESSION_TOKEN;
        candidates.push({
          kind: 'static',
          origin: 'environment',
          accessKeyId,
          secretAccessKey,
          sessionToken: sessionToken ? sessionToken : null,
        });
      } else {
        environmentWithoutKeys = true;
      }
    } else if (STATIC_NAMES.has(name)) {
      if (positional.length < 2 || positional.length > 3) {
        problems.push(
          `${key}: KclStaticCredentialsProvider needs 2 or 3 arguments (accessKeyId|secretAccessKey[|sessionToken]), got ${positional.length}`,
        );
      } else {
        candidates.push({
          kind: 'static',
          origin: 'properties',
          accessKeyId: positional[0] as string,
          secretAccessKey: positional[1] as string,
          sessionToken: positional[2] ?? null,
        });
      }
    } else if (Object.hasOwn(UNSUPPORTED, name)) {
      problems.push(`${key}: ${name} is not supported by kcl-multilang: ${UNSUPPORTED[name]}`);
    } else {
      problems.push(
        `${key}: unknown credentials provider ${JSON.stringify(qualifiedName)}; supported: DefaultCredentialsProvider (or DefaultAWSCredentialsProviderChain), EnvironmentVariableCredentialsProvider, ProfileCredentialsProvider[|profile], KclStaticCredentialsProvider|id|secret[|token], and the providers of the default chain`,
      );
    }
  }

  if (problems.length > 0) return { source: null, problems, warnings };
  const source = candidates[0] ?? null;
  if (source === null) {
    return {
      source: null,
      problems: environmentWithoutKeys
        ? [
            `${key}: EnvironmentVariableCredentialsProvider needs AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY in the environment`,
          ]
        : [`${key}: no usable credentials provider in ${JSON.stringify(value)}`],
      warnings,
    };
  }
  return { source, problems, warnings };
}
