import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { createRequire } from 'node:module';
import { createServer, type Server, Socket } from 'node:net';
import { dirname, join } from 'node:path';

const require = createRequire(import.meta.url);

/** Credentials the local emulators accept. They check only that a request is signed, not by whom. */
export const LOCAL_CREDENTIALS: { readonly accessKeyId: string; readonly secretAccessKey: string } = {
  accessKeyId: 'AKIAKCLLOCALTESTING0',
  secretAccessKey: 'kcl-local-secret',
};

export const LOCAL_REGION = 'us-east-1';

export interface RunningEmulator {
  /** Plain-HTTP endpoint for an AWS SDK client, e.g. `http://127.0.0.1:41234`. */
  readonly endpoint: string;
  readonly port: number;
  readonly region: string;
  /** A fresh object each time: the AWS SDK writes into the credentials it is given. */
  readonly credentials: { accessKeyId: string; secretAccessKey: string };
  /** Stops the emulator. Idempotent. */
  stop(): Promise<void>;
}

/** A free TCP port on 127.0.0.1, as the kernel hands it out. */
export async function freePort(): Promise<number> {
  const server: Server = createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const address = server.address();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  if (address === null || typeof address === 'string') throw new Error('@kcl/testkit: no free port');
  return address.port;
}

export interface KinesisLocalOptions {
  /**
   * How long the emulator keeps a stream in CREATING/UPDATING, per operation. Short values keep tests
   * fast; the defaults (100 ms) still make code wait for ACTIVE as it must against AWS.
   */
  readonly durations?: {
    readonly createStream?: number;
    readonly deleteStream?: number;
    readonly splitShard?: number;
    readonly mergeShards?: number;
    readonly updateShardCount?: number;
    readonly registerStreamConsumer?: number;
  };
  /** Maximum open shards per account (default 200). */
  readonly shardLimit?: number;
  /** Emulator log level (default WARN). */
  readonly logLevel?: 'ERROR' | 'WARN' | 'INFO' | 'DEBUG' | 'TRACE';
  /** How long to wait for the emulator to accept connections (default 30 s). */
  readonly startTimeoutMs?: number;
}

/**
 * Starts kinesis-local (kinesis-mock) as a child process on free ports and waits until it accepts
 * connections. The process is killed by `stop()`, and also when this process exits.
 *
 * Give the Kinesis client `requestHandler: new NodeHttpHandler()`: SubscribeToShard works only over HTTP/1.1.
 */
export async function startKinesisLocal(options: KinesisLocalOptions = {}): Promise<RunningEmulator> {
  const packageDir = dirname(require.resolve('kinesis-local/package.json'));
  const durations = options.durations ?? {};
  const ms = (value: number | undefined): string => `${value ?? 100}ms`;
  let lastError: unknown;
  for (let attempt = 0; attempt < 3; attempt++) {
    const port = await freePort();
    const tlsPort = await freePort();
    // Through the guard, so the emulator ends with this process even when this one is killed with -9.
    const child = spawn(process.execPath, [compiledScript('parent-guard.js'), join(packageDir, 'main.js')], {
      cwd: packageDir,
      stdio: ['pipe', 'pipe', 'pipe'],
      env: {
        ...process.env,
        KINESIS_MOCK_PLAIN_PORT: String(port),
        KINESIS_MOCK_TLS_PORT: String(tlsPort),
        KINESIS_MOCK_CERT_PATH: join(packageDir, 'server.json'),
        CREATE_STREAM_DURATION: ms(durations.createStream),
        DELETE_STREAM_DURATION: ms(durations.deleteStream),
        SPLIT_SHARD_DURATION: ms(durations.splitShard),
        MERGE_SHARDS_DURATION: ms(durations.mergeShards),
        UPDATE_SHARD_COUNT_DURATION: ms(durations.updateShardCount),
        REGISTER_STREAM_CONSUMER_DURATION: ms(durations.registerStreamConsumer),
        SHARD_LIMIT: String(options.shardLimit ?? 200),
        LOG_LEVEL: options.logLevel ?? 'WARN',
        SHOULD_PERSIST_DATA: 'false',
        AWS_REGION: LOCAL_REGION,
      },
    });
    child.stdin?.on('error', () => undefined);
    const output: string[] = [];
    const keep = (chunk: Buffer): void => {
      output.push(chunk.toString('utf8'));
      if (output.length > 50) output.shift();
    };
    child.stdout?.on('data', keep);
    child.stderr?.on('data', keep);
    const killOnExit = (): void => {
      child.kill('SIGKILL');
    };
    process.once('exit', killOnExit);
    try {
      await waitForPort(port, child, options.startTimeoutMs ?? 30_000);
    } catch (error) {
      process.removeListener('exit', killOnExit);
      await stopChild(child);
      lastError = new Error(
        `@kcl/testkit: kinesis-local did not start on port ${port}: ${(error as Error).message}\n${output.join('')}`,
        { cause: error },
      );
      continue;
    }
    let stopped: Promise<void> | undefined;
    return {
      endpoint: `http://127.0.0.1:${port}`,
      port,
      region: LOCAL_REGION,
      get credentials() {
        return { ...LOCAL_CREDENTIALS };
      },
      stop: () => {
        stopped ??= (async () => {
          process.removeListener('exit', killOnExit);
          await stopChild(child);
        })();
        return stopped;
      },
    };
  }
  throw lastError;
}

export interface DynaliteOptions {
  /**
   * Run dynalite in a child process instead of this one. Use it when this process is busy (a test
   * runner parsing output while a fleet of workers talks to the emulator), so requests are not queued
   * behind the test's own work.
   */
  readonly separateProcess?: boolean;
  /** How long tables stay CREATING (default 50 ms, so table creation really waits for ACTIVE). */
  readonly createTableMs?: number;
  readonly deleteTableMs?: number;
  readonly updateTableMs?: number;
}

interface DynaliteServer extends Server {}
type DynaliteFactory = (options: Record<string, unknown>) => DynaliteServer;

/** Starts dynalite (a DynamoDB emulator) on a free port, in memory: in this process, or in a child process. */
export async function startDynalite(options: DynaliteOptions = {}): Promise<RunningEmulator> {
  const settings = {
    createTableMs: options.createTableMs ?? 50,
    deleteTableMs: options.deleteTableMs ?? 50,
    updateTableMs: options.updateTableMs ?? 50,
  };
  if (options.separateProcess === true) return startDynaliteProcess(settings);
  const dynalite = require('dynalite') as DynaliteFactory;
  const server = dynalite(settings);
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const address = server.address();
  if (address === null || typeof address === 'string') {
    server.close();
    throw new Error('@kcl/testkit: dynalite did not bind a TCP port');
  }
  let stopped: Promise<void> | undefined;
  return {
    endpoint: `http://127.0.0.1:${address.port}`,
    port: address.port,
    region: LOCAL_REGION,
    get credentials() {
      return { ...LOCAL_CREDENTIALS };
    },
    stop: () => {
      stopped ??= new Promise<void>((resolve) => {
        server.close(() => resolve());
        // Keep-alive sockets of SDK clients would hold close() open.
        (server as Server & { closeAllConnections?: () => void }).closeAllConnections?.();
      });
      return stopped;
    },
  };
}

async function startDynaliteProcess(settings: Record<string, number>): Promise<RunningEmulator> {
  const child = spawn(process.execPath, [compiledScript('dynalite-server.js'), JSON.stringify(settings)], {
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  const killOnExit = (): void => {
    child.kill('SIGKILL');
  };
  process.once('exit', killOnExit);
  const errors: string[] = [];
  child.stderr?.on('data', (chunk: Buffer) => errors.push(chunk.toString()));
  const port = await new Promise<number>((resolve, reject) => {
    let buffered = '';
    child.stdout?.on('data', (chunk: Buffer) => {
      buffered += chunk.toString();
      const newline = buffered.indexOf('\n');
      if (newline === -1) return;
      const { port: reported } = JSON.parse(buffered.slice(0, newline)) as { port: number | null };
      if (typeof reported === 'number') resolve(reported);
      else reject(new Error('@kcl/testkit: dynalite did not bind a TCP port'));
    });
    child.once('exit', (code) =>
      reject(new Error(`@kcl/testkit: dynalite exited with ${code}: ${errors.join('')}`)),
    );
  }).catch(async (error: unknown) => {
    process.removeListener('exit', killOnExit);
    await stopChild(child);
    throw error;
  });
  let stopped: Promise<void> | undefined;
  return {
    endpoint: `http://127.0.0.1:${port}`,
    port,
    region: LOCAL_REGION,
    get credentials() {
      return { ...LOCAL_CREDENTIALS };
    },
    stop: () => {
      stopped ??= (async () => {
        process.removeListener('exit', killOnExit);
        await stopChild(child);
      })();
      return stopped;
    },
  };
}

/** A script of this package's build output, also when this module runs from source (as in its own tests). */
function compiledScript(name: string): string {
  return join(dirname(require.resolve('@kcl/testkit/package.json')), 'dist', name);
}

async function waitForPort(port: number, child: ChildProcess, timeoutMs: number): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  let exited: string | null = null;
  child.once('exit', (code, signal) => {
    exited = `exited with ${signal ?? code}`;
  });
  while (performance.now() < deadline) {
    if (exited !== null) throw new Error(exited);
    if (await canConnect(port)) return;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`no connection within ${timeoutMs} ms`);
}

function canConnect(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = new Socket();
    const done = (result: boolean): void => {
      socket.destroy();
      resolve(result);
    };
    socket.setTimeout(1_000, () => done(false));
    socket.once('connect', () => done(true));
    socket.once('error', () => done(false));
    socket.connect(port, '127.0.0.1');
  });
}

async function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = once(child, 'exit');
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 3_000);
  await exited;
  clearTimeout(timer);
}
