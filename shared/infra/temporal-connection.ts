// Where Temporal is and how to reach it, for the worker, the API and the scripts alike: the
// environment configuration every Temporal SDK and the CLI read (`@temporalio/envconfig`):
// `TEMPORAL_ADDRESS`, `TEMPORAL_NAMESPACE`, `TEMPORAL_API_KEY`, `TEMPORAL_TLS`,
// `TEMPORAL_TLS_CLIENT_CERT_PATH` / `_KEY_PATH` / `_SERVER_CA_CERT_PATH` / `_SERVER_NAME` (or their
// `_DATA` forms), `TEMPORAL_GRPC_META_*`, and a profile of a `temporal.toml` file.
//
// The file is read only when asked for (`TEMPORAL_CONFIG_FILE` or `TEMPORAL_PROFILE` set): a
// developer's own `~/.config/temporalio/temporal.toml`, written by `temporal config set` for
// another purpose, does not silently move `npm start` to another cluster. What neither the profile
// nor the environment says comes from kumoss.yaml (`temporal.address`, `temporal.namespace`).
import { Connection, type ConnectionOptions } from '@temporalio/client';
import { loadClientConfigProfile, toClientOptions } from '@temporalio/envconfig';
import { NativeConnection, type NativeConnectionOptions } from '@temporalio/worker';
import type { KumossConfig } from './config';

export interface TemporalTarget {
  address: string;
  namespace: string;
  /** What the SDK connects with (address, TLS, API key, gRPC metadata). Holds secrets: never log it. */
  connection: NativeConnectionOptions & ConnectionOptions;
  /** For logs and /health: how it connects, without the secrets. */
  describe: {
    address: string;
    namespace: string;
    tls: boolean;
    mtls: boolean;
    api_key: boolean;
    profile?: string;
  };
}

export class TemporalConfigError extends Error {
  override name = 'TemporalConfigError';
}

export function temporalTarget(
  config: Pick<KumossConfig['temporal'], 'address' | 'namespace'>,
  env: NodeJS.ProcessEnv = process.env,
): TemporalTarget {
  const fileWanted = Boolean(env.TEMPORAL_CONFIG_FILE || env.TEMPORAL_PROFILE);
  const vars = Object.fromEntries(
    Object.entries(env).filter((e): e is [string, string] => typeof e[1] === 'string'),
  );
  let profile;
  try {
    profile = loadClientConfigProfile({ disableFile: !fileWanted, overrideEnvVars: vars });
  } catch (err) {
    const where = env.TEMPORAL_CONFIG_FILE ?? 'the default temporal.toml';
    throw new TemporalConfigError(
      `Temporal connection profile ${env.TEMPORAL_PROFILE ?? 'default'} from ${where}: ${(err as Error).message}`,
    );
  }
  const address = profile.address ?? config.address;
  const namespace = profile.namespace ?? config.namespace;
  const { connectionOptions } = toClientOptions({ ...profile, address, namespace });
  const tls = connectionOptions.tls;
  const connection = {
    address,
    ...(tls !== undefined ? { tls } : {}),
    ...(connectionOptions.apiKey !== undefined ? { apiKey: connectionOptions.apiKey } : {}),
    ...(connectionOptions.metadata ? { metadata: connectionOptions.metadata } : {}),
  } as NativeConnectionOptions & ConnectionOptions;
  return {
    address,
    namespace,
    connection,
    describe: {
      address,
      namespace,
      tls: Boolean(tls),
      mtls: typeof tls === 'object' && tls !== null && Boolean(tls.clientCertPair),
      api_key: connectionOptions.apiKey !== undefined,
      ...(fileWanted ? { profile: env.TEMPORAL_PROFILE ?? 'default' } : {}),
    },
  };
}

/** A client connection (the API, scripts). */
export function connectClient(t: TemporalTarget): Promise<Connection> {
  return Connection.connect(t.connection);
}

/** A worker connection. */
export function connectNative(t: TemporalTarget): Promise<NativeConnection> {
  return NativeConnection.connect(t.connection);
}
