// The cluster tier (npm run test:cluster): the stack is a real Temporal cluster — the server's four
// services as processes of their own — with persistence and visibility on a real PostgreSQL
// server, and Kumoss's metadata on the same server. This file checks that shape itself; the drift
// round, pull-request, events and runner DAG test files run on it beside this one.
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { driftRoundWorkflowId } from '../../shared/ids';
import { driftRoundSearchAttributes, KUMOSS_SEARCH_ATTRIBUTES } from '../../shared/search-attributes';
import type { DriftRoundResult } from '../../shared/contracts';
import { driftRound } from '../../workflows';
import { newTestBed, roundInput, stack, temporalHarness, type TemporalHarness } from '../support/stack';

describe('a real Temporal cluster on PostgreSQL', () => {
  let h: TemporalHarness;
  beforeAll(async () => {
    h = await temporalHarness('cluster');
  });
  afterAll(async () => {
    await h?.close();
  });

  const query = async (url: string, sql: string, params: unknown[] = []) => {
    const c = new pg.Client({ connectionString: url });
    await c.connect();
    try {
      return (await c.query(sql, params)).rows as Record<string, unknown>[];
    } finally {
      await c.end();
    }
  };
  const database = (name: string) => {
    const u = new URL(stack().postgresUrl);
    u.pathname = `/${name}`;
    return u.toString();
  };

  it('runs four service processes, the search attributes added through the operator service', async () => {
    const cluster = stack().cluster;
    expect(cluster).toBeDefined();
    const pids = Object.entries(cluster!.pids);
    expect(pids.map(([s]) => s).sort()).toEqual(['frontend', 'history', 'matching', 'worker']);
    expect(new Set(pids.map(([, p]) => p)).size).toBe(4);
    for (const [, pid] of pids) expect(() => process.kill(pid, 0)).not.toThrow();
    const info = await h.client.workflowService.getSystemInfo({});
    expect(info.serverVersion).toBe('1.29.1');
    const attrs = await h.client.connection.operatorService.listSearchAttributes({
      namespace: stack().namespace,
    });
    for (const name of KUMOSS_SEARCH_ATTRIBUTES.map((a) => a.name))
      expect(Object.keys(attrs.customAttributes ?? {})).toContain(name);
  });

  it("keeps a round's history in PostgreSQL and finds it by Kumoss's search attributes", async () => {
    const bed = await newTestBed();
    try {
      await bed.inject('attribute');
      const args = roundInput(bed.repoUrl);
      const workflowId = driftRoundWorkflowId(args.session_id, args.round_id);
      const result: DriftRoundResult = await h.client.workflow.execute(driftRound, {
        taskQueue: h.taskQueue,
        workflowId,
        args: [args],
        // As the session workflow starts its rounds.
        typedSearchAttributes: driftRoundSearchAttributes(args),
      });
      expect(result).toMatchObject({ status: 'completed', outcome: 'Succeeded' });
      // Persistence: the run's row in the history database.
      const rows = await query(
        database('temporal'),
        'select count(*)::int as n from current_executions where workflow_id = $1',
        [workflowId],
      );
      expect(rows[0]?.n).toBe(1);
      // Visibility on PostgreSQL answers a query on the session's search attribute.
      await expect
        .poll(
          async () => {
            const ids: string[] = [];
            for await (const w of h.client.workflow.list({
              query: `KumossSessionId = '${args.session_id}' AND KumossOutcome = 'Succeeded'`,
            }))
              ids.push(w.workflowId);
            return ids;
          },
          { timeout: 30_000, interval: 500 },
        )
        .toEqual([workflowId]);
    } finally {
      await bed.destroy();
    }
  });

  it("keeps Kumoss's metadata on the same PostgreSQL server, not the embedded engine", async () => {
    const [row] = await query(stack().databaseUrl, 'select current_database() as db, version() as v');
    expect(row?.db).toBe('kumoss');
    expect(String(row?.v)).toMatch(/^PostgreSQL \d+/);
    expect(String(row?.v)).not.toMatch(/wasm|emscripten/i);
    const [port] = await query(database('postgres'), 'select inet_server_port() as p');
    expect(Number(port?.p)).toBe(Number(new URL(stack().databaseUrl).port));
    const tables = await query(
      stack().databaseUrl,
      "select count(*)::int as n from information_schema.tables where table_name = 'sessions'",
    );
    expect(tables[0]?.n).toBe(1);
  });
});
