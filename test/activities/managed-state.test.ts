// Kumoss-managed state (issue 16 item 8): a root that declares no backend keeps its state in the
// object store under its state project id — shared by every worker's checkout, never in the
// checkout, never committed — and one engine call at a time holds its lease. Real terraform and
// tofu, the stack's s3rver, git host and metadata store.
import { testCloudDir } from '../support/test-cloud';
import { execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { GetObjectCommand, ListObjectsV2Command } from '@aws-sdk/client-s3';
import { afterAll, describe, expect, it } from 'vitest';
import {
  declaresBackend,
  MANAGED_BACKEND_FILE,
  managedStateKey,
  StateLeaseLost,
  StateLockTimeout,
} from '../../activities/managed-state';
import { SECRET_MARKER } from '../support/secret-scan';
import { unzipSync } from 'fflate';
import { readConfigFiles, RoundWorkspaces, type RoundRef } from '../../activities/workspace';
import { createDb } from '../../shared/infra/db';
import { legacyStateProjectId, stateProjectId } from '../../shared/infra/db/sessions';
import { releaseStateLock, tryAcquireStateLock } from '../../shared/infra/db/state-locks';
import { createS3Client } from '../../shared/infra/object-store';
import { ENGINES, engineDeps, gitClient, seedRepository as seedRepo, stack } from '../support/stack';
import { stackManagedState } from '../support/test-stack';

const TIME_ROOT = `terraform {
  required_providers {
    time = {
      source  = "hashicorp/time"
      version = "0.14.2"
    }
  }
}

resource "time_static" "created" {}
`;

const root = mkdtempSync(join(tmpdir(), 'kumoss-managed-state-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const seedRepository = (name: string, files: Record<string, string>) => seedRepo(root, name, files);

describe('declaresBackend', () => {
  const dirWith = (files: Record<string, string>) => {
    const dir = mkdtempSync(join(root, 'decl-'));
    for (const [f, text] of Object.entries(files)) writeFileSync(join(dir, f), text);
    return dir;
  };

  it('finds a backend or cloud block in .tf and .tf.json files, and ignores Kumoss’s own override', async () => {
    expect(await declaresBackend(dirWith({ 'main.tf': TIME_ROOT }))).toBe(false);
    expect(
      await declaresBackend(
        dirWith({ 'main.tf': TIME_ROOT, 'be.tf': 'terraform {\n  backend "gcs" {}\n}\n' }),
      ),
    ).toBe(true);
    expect(
      await declaresBackend(
        dirWith({ 'main.tf': 'terraform {\n  cloud {\n    organization = "x"\n  }\n}\n' }),
      ),
    ).toBe(true);
    expect(
      await declaresBackend(
        dirWith({ 'main.tf.json': JSON.stringify({ terraform: { backend: { s3: {} } } }) }),
      ),
    ).toBe(true);
    expect(
      await declaresBackend(
        dirWith({ 'main.tf': TIME_ROOT, [MANAGED_BACKEND_FILE]: 'terraform {\n  backend "s3" {}\n}\n' }),
      ),
    ).toBe(false);
    // The word elsewhere (a comment, a string, a block of another kind) is not the block.
    expect(
      await declaresBackend(
        dirWith({
          'main.tf': `${TIME_ROOT}\n# no backend here: the cloud is Kumoss's\nlocals {\n  backend = "cloud"\n}\n`,
        }),
      ),
    ).toBe(false);
    expect(
      await declaresBackend(dirWith({ 'a.tf': TIME_ROOT, 'z.tf': 'terraform{backend "local"{}}\n' })),
    ).toBe(true);
  });
});

describe.each(ENGINES)('Kumoss-managed state (%s)', (engine) => {
  const s = stack();
  const db = createDb(s.databaseUrl, { max: 2 });
  afterAll(() => db.destroy());
  const s3 = createS3Client({ endpoint: s.s3Endpoint, bucket: s.bucket, region: 'us-east-1' });
  const managedState = stackManagedState(s, db, { lockPollMs: 50 });
  const worker = (name: string, managed = managedState) =>
    new RoundWorkspaces(
      join(root, `${engine}-${name}`),
      gitClient(),
      {
        terraform: { ...engineDeps(), managedState: managed },
        tofu: { ...engineDeps('tofu'), managedState: managed },
      },
      engine,
    );
  const url = seedRepository(`team/managed-${engine}-${Date.now()}`, { 'main.tf': TIME_ROOT });
  const sessionId = `s-managed-${engine}`;
  const ref = (roundId: string): RoundRef => ({
    sessionId,
    roundId,
    repositoryUrl: url,
    iacPath: '',
    scopeId: 'scope-managed',
    cloud: 'aws',
    branch: `kumoss/${sessionId}`,
    engine,
  });
  const projectId = legacyStateProjectId(url, '', 'scope-managed');
  const key = managedStateKey('state', projectId);

  it('keeps the state of a root without a backend in the object store, shared by every worker and never committed', async () => {
    const a = await worker('a').get(ref('r1'));
    await a.engine.apply({}, {});
    const object = await s3.send(new GetObjectCommand({ Bucket: s.bucket, Key: key }));
    const state = JSON.parse(await object.Body!.transformToString()) as {
      serial: number;
      lineage: string;
      resources: { type: string; name: string }[];
    };
    expect(state.resources.map((r) => `${r.type}.${r.name}`)).toEqual(['time_static.created']);
    expect(existsSync(join(a.iacDir, 'terraform.tfstate'))).toBe(false);
    // The override is there for the engine, and for nothing else: not for git, not for the model.
    expect(existsSync(join(a.iacDir, MANAGED_BACKEND_FILE))).toBe(true);
    const status = execFileSync('git', ['status', '--porcelain', '--untracked-files=all'], { cwd: a.dir })
      .toString()
      .split('\n')
      .filter((l) => l && !l.includes('.terraform'));
    expect(status).toEqual([]);
    expect((await readConfigFiles(a.iacDir, a.dir)).map((f) => f.path)).toEqual(['main.tf']);
    // The store's credentials never reach an argument list.
    expect(a.engine.calls.map((c) => c.args.join(' ')).join('\n')).not.toContain('S3RVER');

    // Another worker, its own checkout: the same state, nothing to do.
    const b = await worker('b').get(ref('r2'));
    expect(b.dir).not.toBe(a.dir);
    const plan = await b.engine.plan({ out: join(b.scratch, 'check.tfplan') });
    expect(plan.hasChanges).toBe(false);
    expect((await b.engine.stateVersion())?.serial).toBe(state.serial);
  });

  it('gives two organizations on the same repository, path and scope a state each', async () => {
    const [orgA, orgB] = [randomUUID(), randomUUID()];
    const idA = stateProjectId(orgA, url, '', 'scope-managed');
    const idB = stateProjectId(orgB, url, './', 'scope-managed');
    expect(new Set([idA, idB, projectId]).size).toBe(3);
    expect(stateProjectId(orgA, url, '.', 'scope-managed')).toBe(idA);
    const a = await worker('org-a').get({
      ...ref('r-org-a'),
      sessionId: `${sessionId}-a`,
      stateProjectId: idA,
    });
    // Organization A's state starts empty: the root's existing state (another tenant's) is not read.
    expect((await a.engine.plan({ out: join(a.scratch, 'a.tfplan') })).hasChanges).toBe(true);
    await a.engine.apply({}, {});
    const b = await worker('org-b').get({
      ...ref('r-org-b'),
      sessionId: `${sessionId}-b`,
      stateProjectId: idB,
    });
    expect((await b.engine.plan({ out: join(b.scratch, 'b.tfplan') })).hasChanges).toBe(true);
    const listed = await s3.send(new ListObjectsV2Command({ Bucket: s.bucket, Prefix: 'state/' }));
    const keys = (listed.Contents ?? []).map((o) => o.Key);
    expect(keys).toContain(managedStateKey('state', idA));
    expect(keys).not.toContain(managedStateKey('state', idB));
  });

  it("keeps the store's keys out of every plan, checkout and .terraform/, and a grant dies with its engine process", async () => {
    const secret = `${SECRET_MARKER}-store-${randomUUID()}`;
    // s3rver checks the key id but not the signature: the secret key can be unique and searched for.
    const keyed = stackManagedState(s, db, { lockPollMs: 50, secretAccessKey: secret });
    const ws = await worker('keys', keyed).get({ ...ref('r-keys'), sessionId: `${sessionId}-keys` });
    const planFile = join(ws.scratch, 'keys.tfplan');
    await ws.engine.plan({ out: planFile });
    await ws.engine.applyPlan(planFile);
    // Every file the engine left: the plan (each entry of its zip) and the whole checkout.
    const texts: [string, string][] = Object.entries(unzipSync(readFileSync(planFile))).map(
      ([name, bytes]) => [`plan ${name}`, Buffer.from(bytes).toString('latin1')],
    );
    const walk = (dir: string): void => {
      for (const e of readdirSync(dir, { withFileTypes: true })) {
        const path = join(dir, e.name);
        if (e.isDirectory() && e.name !== '.git') walk(path);
        else if (e.isFile() && statSync(path).size < 50 * 1024 * 1024)
          texts.push([path, readFileSync(path, 'latin1')]);
      }
    };
    walk(ws.dir);
    expect(texts.some(([where]) => where.endsWith(join('.terraform', 'terraform.tfstate')))).toBe(true);
    for (const [where, text] of texts) {
      expect(text.includes(secret), where).toBe(false);
      expect(text.includes('TF_HTTP_PASSWORD'), where).toBe(false);
    }
    // No grant outlives its engine process; a revoked grant's password is refused.
    expect(keyed.server.activeGrants).toBe(0);
    const grant = await keyed.server.grant(projectId);
    const get = (env: Record<string, string>, address = env.TF_HTTP_ADDRESS ?? '') =>
      fetch(address, {
        headers: {
          authorization: `Basic ${Buffer.from(`${env.TF_HTTP_USERNAME}:${env.TF_HTTP_PASSWORD}`).toString('base64')}`,
        },
      });
    expect((await get(grant.env)).status).toBe(200);
    // A grant is for its own state only.
    const other = (await get(grant.env, grant.env.TF_HTTP_ADDRESS?.replace(projectId, 'another-state')))
      .status;
    expect(other).toBe(401);
    grant.revoke();
    expect((await get(grant.env)).status).toBe(401);
    // Reading is not writing: a grant taken without the lease cannot change the state.
    const reader = await keyed.server.grant(projectId);
    const post = await fetch(reader.env.TF_HTTP_ADDRESS ?? '', {
      method: 'POST',
      body: '{}',
      headers: {
        authorization: `Basic ${Buffer.from(`${reader.env.TF_HTTP_USERNAME}:${reader.env.TF_HTTP_PASSWORD}`).toString('base64')}`,
      },
    });
    expect(post.status).toBe(409);
    reader.revoke();
  });

  it('a lease lost under a running apply stops that apply, and its state write is refused', async () => {
    const sleepUrl = seedRepository(`team/lease-${engine}-${Date.now()}`, {
      'main.tf': `${TIME_ROOT}
resource "time_sleep" "long" {
  create_duration = "120s"
}
`,
    });
    const shortLease = stackManagedState(s, db, { lockPollMs: 50, lockTtlMs: 3000 });
    const ws = await worker('lease', shortLease).get({
      ...ref('r-lease'),
      repositoryUrl: sleepUrl,
      sessionId: `${sessionId}-lease`,
    });
    const leaseId = legacyStateProjectId(sleepUrl, '', 'scope-managed');
    await ws.engine.ensureInit();
    const started = Date.now();
    const applying = ws.engine.apply({}, {}).catch((err: unknown) => err);
    // Once the apply holds the lease, another holder takes it (as after an expiry on a stalled worker).
    for (;;) {
      const row = await db
        .selectFrom('state_locks')
        .select('holder')
        .where('state_project_id', '=', leaseId)
        .executeTakeFirst();
      if (row) break;
      await new Promise((r) => setTimeout(r, 50));
    }
    await db
      .updateTable('state_locks')
      .set({ holder: 'thief' })
      .where('state_project_id', '=', leaseId)
      .execute();
    const err = await applying;
    expect(err).toBeInstanceOf(StateLeaseLost);
    expect((err as Error).message).toMatch(
      /^The state lease of (terraform|tofu) apply was lost: another holder took it/,
    );
    // Stopped long before time_sleep's two minutes.
    expect(Date.now() - started).toBeLessThan(60_000);
    // Nothing the stopped apply tried to write reached the state; the new holder keeps its lease.
    const listed = await s3.send(new ListObjectsV2Command({ Bucket: s.bucket, Prefix: `state/${leaseId}/` }));
    if (listed.KeyCount) {
      const object = await s3.send(
        new GetObjectCommand({ Bucket: s.bucket, Key: managedStateKey('state', leaseId) }),
      );
      expect(await object.Body!.transformToString()).not.toContain('time_sleep');
    }
    const row = await db
      .selectFrom('state_locks')
      .select('holder')
      .where('state_project_id', '=', leaseId)
      .executeTakeFirstOrThrow();
    expect(row.holder).toBe('thief');
    await releaseStateLock(db, leaseId, 'thief');
  });

  it('runs one state call at a time: a plan waits while another holds the lease, then runs', async () => {
    expect(
      await tryAcquireStateLock(db, projectId, 'test-holder', 'an apply on another worker', 60_000),
    ).toEqual({ acquired: true });
    const ws = await worker('c').get(ref('r3'));
    const beats: string[] = [];
    const plan = await ws.engine.plan(
      { out: join(ws.scratch, 'wait.tfplan') },
      {
        heartbeat: (d) => {
          beats.push(d);
          // The holder finishes once the plan is seen waiting for it.
          if (d.startsWith('waiting for the state lock')) void releaseStateLock(db, projectId, 'test-holder');
        },
      },
    );
    expect(beats[0]).toBe('waiting for the state lock held by an apply on another worker');
    expect(plan.hasChanges).toBe(false);
    // Released after the call: nothing holds the state now.
    expect(
      await db.selectFrom('state_locks').selectAll().where('state_project_id', '=', projectId).execute(),
    ).toEqual([]);
  });

  it('plans without the lease when the plan takes no lock (a detection), and leaves the holder its lease', async () => {
    expect(
      await tryAcquireStateLock(db, projectId, 'test-holder', 'an apply on another worker', 60_000),
    ).toEqual({ acquired: true });
    try {
      const ws = await worker('c').get(ref('r3b'));
      const beats: string[] = [];
      const plan = await ws.engine.plan(
        { out: join(ws.scratch, 'read.tfplan'), lock: false },
        { heartbeat: (d) => beats.push(d) },
      );
      expect(plan.hasChanges).toBe(false);
      expect(beats.filter((d) => d.startsWith('waiting for the state lock'))).toEqual([]);
      expect(
        await db
          .selectFrom('state_locks')
          .select('holder')
          .where('state_project_id', '=', projectId)
          .execute(),
      ).toEqual([{ holder: 'test-holder' }]);
    } finally {
      await releaseStateLock(db, projectId, 'test-holder');
    }
  });

  it('takes over a lease its holder stopped renewing, and gives up on a live one after the lock wait', async () => {
    // A holder killed mid-apply: its lease (1 ms) has run out by the time the plan, after its
    // init, asks for it.
    await tryAcquireStateLock(db, projectId, 'killed-worker', 'terraform apply (a killed worker)', 1);
    const ws = await worker('d').get(ref('r4'));
    const beats: string[] = [];
    await ws.engine.plan({ out: join(ws.scratch, 'takeover.tfplan') }, { heartbeat: (d) => beats.push(d) });
    expect(beats.filter((b) => b.startsWith('waiting for the state lock'))).toEqual([]);

    // A live holder and a short lock wait: the call fails (and its activity is retried), the
    // holder keeps the lease.
    await tryAcquireStateLock(db, projectId, 'live-holder', 'a long apply', 60_000);
    const impatient = stackManagedState(s, db, { lockPollMs: 50, lockWaitMs: 300 });
    const e = await worker('e', impatient).get(ref('r5'));
    const failed = await e.engine
      .plan({ out: join(e.scratch, 'timeout.tfplan') })
      .catch((err: unknown) => err);
    expect(failed).toBeInstanceOf(StateLockTimeout);
    expect((failed as Error).message).toBe('The state is locked by a long apply; waited 0 s for it');
    const row = await db
      .selectFrom('state_locks')
      .select('holder')
      .where('state_project_id', '=', projectId)
      .executeTakeFirstOrThrow();
    expect(row.holder).toBe('live-holder');
    await releaseStateLock(db, projectId, 'live-holder');
  });

  it('leaves a root that declares its own backend alone', async () => {
    // Its own backend's state stands where the sandboxed engine may write (the test's "remote" store).
    const stateFile = join(mkdtempSync(join(testCloudDir(), 'own-')), 'own.tfstate');
    const ownUrl = seedRepository(`team/own-backend-${engine}-${Date.now()}`, {
      'main.tf': TIME_ROOT.replace(
        'terraform {\n',
        `terraform {\n  backend "local" {\n    path = ${JSON.stringify(stateFile)}\n  }\n`,
      ),
    });
    const ws = await worker('f').get({ ...ref('r6'), repositoryUrl: ownUrl, sessionId: `s-own-${engine}` });
    await ws.engine.apply({}, {});
    expect(existsSync(stateFile)).toBe(true);
    expect(existsSync(join(ws.iacDir, MANAGED_BACKEND_FILE))).toBe(false);
    const listed = await s3.send(
      new ListObjectsV2Command({
        Bucket: s.bucket,
        Prefix: `state/${legacyStateProjectId(ownUrl, '', 'scope-managed')}/`,
      }),
    );
    expect(listed.KeyCount ?? 0).toBe(0);
  });
});
