// A token goes to the origin it belongs to and nowhere else: two HTTPS servers on loopback, one
// registered (GIT_TOKEN's host, as services.github.hosts names it) and one nobody registered; git
// asks both, and only the registered one ever sees an Authorization header.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startAuthRecorder, type AuthRecorder } from '../support/auth-recorder';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GitClient } from '../../activities/git';
import { ensureCertificates } from '../../scripts/embedded/git-host';
import { loadConfig } from '../../shared/infra/config';
import { gitHostTokens } from '../../worker/deps';

describe('git credentials are bound to the origin they were given for', () => {
  const dir = mkdtempSync(join(tmpdir(), 'kumoss-git-cred-'));
  let registered: AuthRecorder;
  let unregistered: AuthRecorder;
  let caFile: string;
  const TOKEN = 'ghp_kumoss-origin-bound-token';

  beforeAll(async () => {
    const certs = await ensureCertificates(join(dir, 'certs'));
    caFile = certs.caPath;
    registered = await startAuthRecorder(certs);
    unregistered = await startAuthRecorder(certs);
  });
  afterAll(() => {
    registered.server.close();
    unregistered.server.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const config = () => {
    const base = loadConfig({});
    return {
      ...base,
      services: {
        ...base.services,
        github: { ...base.services.github, hosts: [new URL(registered.origin).host] },
        gitlab: { ...base.services.gitlab, hosts: [] },
        gitea: { ...base.services.gitea, url: '' },
      },
    };
  };

  it('GIT_TOKEN becomes the credential of the configured forge hosts only', () => {
    expect(gitHostTokens(config(), { GIT_TOKEN: TOKEN })).toEqual({ [registered.origin]: TOKEN });
    expect(gitHostTokens(config(), {})).toEqual({});
  });

  it('an HTTPS server nobody registered receives no Authorization header', async () => {
    const git = new GitClient({ caFile, hostTokens: gitHostTokens(config(), { GIT_TOKEN: TOKEN }) });
    const env = git.env();
    const keys = Object.entries(env).filter(([k]) => k.startsWith('GIT_CONFIG_KEY_'));
    expect(keys.map(([, v]) => v)).toEqual([`http.${registered.origin}/.extraHeader`]);

    await expect(git.remoteBranches(`${unregistered.origin}/team/repo.git`)).rejects.toThrow();
    expect(unregistered.authorization.length).toBeGreaterThan(0);
    expect(unregistered.authorization.every((h) => h === undefined)).toBe(true);

    // The same client does send it to the host it is registered for (same address, other port).
    await expect(git.remoteBranches(`${registered.origin}/team/repo.git`)).rejects.toThrow();
    const expected = `Basic ${Buffer.from(`x-access-token:${TOKEN}`).toString('base64')}`;
    expect(registered.authorization).toContain(expected);
  });
});
