// Search attributes registered at start-up on a namespace that has none of them (a namespace
// registered here on the real dev server, as an operator would on a cluster): the missing ones are
// added, a second start-up adds nothing, and the dev server's own list says the same as the code's.
import { randomUUID } from 'node:crypto';
import { Connection } from '@temporalio/client';
import type Long from 'long';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadDevServerSpec } from '../../../scripts/embedded/temporal-dev';
import { KUMOSS_SEARCH_ATTRIBUTES } from '../../../shared/search-attributes';
import { ensureSearchAttributes } from '../../../shared/infra/temporal-setup';
import { stack } from '../../support/stack';

describe('search attributes at start-up', () => {
  let connection: Connection;
  beforeAll(async () => {
    connection = await Connection.connect({ address: stack().temporalAddress });
  });
  afterAll(async () => {
    await connection?.close();
  });

  it('are added where missing, once, and match temporal-dev.yaml', async () => {
    const names = KUMOSS_SEARCH_ATTRIBUTES.map((k) => k.name);
    expect(Object.keys(loadDevServerSpec().search_attributes).sort()).toEqual([...names].sort());

    const namespace = `kumoss-sa-${randomUUID().slice(0, 8)}`;
    await connection.workflowService.registerNamespace({
      namespace,
      // protobufjs takes a number where the generated type says Long.
      workflowExecutionRetentionPeriod: { seconds: 86_400 as unknown as Long },
    });
    // A namespace just registered takes a moment to reach every service.
    let added: string[] = [];
    await expect
      .poll(
        async () => {
          added = await ensureSearchAttributes(connection, namespace);
          return added.length;
        },
        { timeout: 30_000, interval: 500 },
      )
      .toBe(names.length);
    expect(added.sort()).toEqual([...names].sort());
    const listed = await connection.operatorService.listSearchAttributes({ namespace });
    for (const n of names) expect(listed.customAttributes?.[n]).toBe(2); // Keyword
    expect(await ensureSearchAttributes(connection, namespace)).toEqual([]);
  });
});
