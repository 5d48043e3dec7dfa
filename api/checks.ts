// Component checks for /health, built from configuration.
import { request } from 'node:https';
import { readFileSync } from 'node:fs';
import { HeadBucketCommand } from '@aws-sdk/client-s3';
import type { Connection } from '@temporalio/client';
import type { ArtifactStore } from '../shared/infra/object-store';
import type { Db } from '../shared/infra/db';
import { ping } from '../shared/infra/db';
import type { ComponentCheck } from './routes/health';
import { requestJson } from '../shared/infra/http-json';
import { sandboxOfIdentity } from '../shared/worker-identity';

export function temporalCheck(connection: Connection, namespace: string): ComponentCheck {
  return {
    name: 'temporal',
    async check() {
      const info = await connection.workflowService.getSystemInfo({});
      await connection.workflowService.describeNamespace({ namespace });
      return `server ${info.serverVersion ?? 'unknown'}, namespace ${namespace}`;
    },
  };
}

/**
 * A worker polls the task queue: without one a request is accepted by nobody (the session's
 * first Update would time out). Temporal remembers a poller for a minute or so after it stops.
 */
export function workerCheck(connection: Connection, namespace: string, taskQueue: string): ComponentCheck {
  return {
    name: 'worker',
    async check() {
      const r = await connection.workflowService.describeTaskQueue({
        namespace,
        taskQueue: { name: taskQueue },
        taskQueueType: 1, // TASK_QUEUE_TYPE_WORKFLOW
      });
      const pollers = r.pollers ?? [];
      if (pollers.length === 0) throw new Error(`no worker polls task queue ${taskQueue} yet`);
      // Each worker names its engine sandbox's state in its identity (shared/worker-identity.ts).
      const sandboxes = pollers.map((p) => sandboxOfIdentity(p.identity ?? '') ?? 'unknown');
      const unavailable = pollers.filter((_, i) => sandboxes[i] === 'unavailable');
      if (unavailable.length)
        throw new Error(
          `worker ${unavailable.map((p) => p.identity?.split(' ')[0]).join(', ')} cannot run the engine sandbox (bubblewrap): its engine calls are refused`,
        );
      const states = [...new Set(sandboxes)].sort().join(', ');
      return `${pollers.length} poller(s) on task queue ${taskQueue}; engine sandbox: ${states}`;
    },
  };
}

export function storageCheck(store: ArtifactStore): ComponentCheck {
  return {
    name: 'object_store',
    async check() {
      await store.s3.send(new HeadBucketCommand({ Bucket: store.bucket }));
      return `bucket ${store.bucket}`;
    },
  };
}

export function databaseCheck(db: Db): ComponentCheck {
  return { name: 'database', check: async () => (await ping(db)).split(' on ')[0] ?? 'up' };
}

export function gitHostCheck(url: string, caFile: string): ComponentCheck {
  return {
    name: 'git_host',
    check: () =>
      new Promise((resolve, reject) => {
        const req = request(`${url}/`, { ca: readFileSync(caFile), timeout: 2000 }, (res) => {
          let body = '';
          res.on('data', (d: Buffer) => (body += d.toString()));
          res.on('end', () => {
            if (res.statusCode !== 200) return reject(new Error(`HTTP ${res.statusCode}`));
            const repos = (JSON.parse(body) as { repositories: string[] }).repositories.length;
            resolve(`${url} (${repos} repositories)`);
          });
        });
        req.on('error', reject);
        req.end();
      }),
  };
}

/** A Gitea forge: its version from /api/v1/version. */
export function forgeCheck(url: string, caFile: string): ComponentCheck {
  return {
    name: 'forge',
    check: async () => {
      const v = (await requestJson(`${url}/api/v1/version`, {
        ca: readFileSync(caFile),
        timeoutMs: 2000,
      })) as {
        version?: string;
      };
      return `Gitea ${v.version ?? '?'} at ${url}`;
    },
  };
}
