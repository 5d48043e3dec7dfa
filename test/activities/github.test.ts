// The GitHub pull-request client through the real @octokit/rest, against a loopback server that
// speaks the GitHub REST API (POST /repos/{o}/{r}/pulls, PUT /repos/{o}/{r}/pulls/{n}/merge).
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GitHubPullRequests, githubRepo } from '../../activities/github';

describe('GitHub pull requests (loopback GitHub REST API)', () => {
  let server: Server;
  let baseUrl: string;
  const seen: { method: string; url: string; auth?: string; body: Record<string, unknown> }[] = [];

  beforeAll(async () => {
    server = createServer((req, res) => {
      let text = '';
      req.on('data', (d: Buffer) => (text += d.toString()));
      req.on('end', () => {
        const body = (text ? JSON.parse(text) : {}) as Record<string, unknown>;
        seen.push({ method: req.method ?? '', url: req.url ?? '', auth: req.headers.authorization, body });
        res.setHeader('content-type', 'application/json; charset=utf-8');
        if (req.method === 'POST' && req.url === '/repos/acme/infra/pulls') {
          res.writeHead(201);
          res.end(
            JSON.stringify({
              number: 42,
              html_url: 'https://github.com/acme/infra/pull/42',
              state: 'open',
              title: body.title,
            }),
          );
        } else if (req.method === 'PUT' && req.url === '/repos/acme/infra/pulls/42/merge') {
          res.writeHead(200);
          res.end(
            JSON.stringify({ sha: 'abc123', merged: true, message: 'Pull Request successfully merged' }),
          );
        } else if (req.method === 'PUT' && req.url === '/repos/acme/infra/pulls/43/merge') {
          res.writeHead(405);
          res.end(
            JSON.stringify({
              message: 'Pull Request is not mergeable',
              documentation_url: 'https://docs.github.com',
            }),
          );
        } else {
          res.writeHead(404);
          res.end(JSON.stringify({ message: 'Not Found' }));
        }
      });
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(() => {
    server?.close();
  });

  it('parses owner and repository from the https URL', () => {
    expect(githubRepo('https://github.com/acme/infra.git')).toEqual({ owner: 'acme', repo: 'infra' });
    expect(() => githubRepo('https://github.com/acme')).toThrow(/not a GitHub repository URL/);
  });

  it('opens and merges a pull request with the token, through the real SDK', async () => {
    const gh = new GitHubPullRequests({ token: 'ghp_KUMOSS-SECRET-loopback0123456789', baseUrl });
    const opened = await gh.open({
      repositoryUrl: 'https://github.com/acme/infra.git',
      head: 'kumoss/s-1',
      base: 'main',
      title: 'Reconcile drift',
      body: 'Body',
    });
    expect(opened).toEqual({ number: 42, url: 'https://github.com/acme/infra/pull/42' });
    expect(
      await gh.merge({ repositoryUrl: 'https://github.com/acme/infra.git', number: 42, message: 'Merge' }),
    ).toEqual({ commit: 'abc123' });
    expect(seen[0]).toMatchObject({
      method: 'POST',
      auth: 'token ghp_KUMOSS-SECRET-loopback0123456789',
      body: { head: 'kumoss/s-1', base: 'main', title: 'Reconcile drift', body: 'Body' },
    });
    expect(seen[1]).toMatchObject({ method: 'PUT', body: { merge_method: 'merge', commit_title: 'Merge' } });
  });

  it('surfaces GitHub refusing a merge', async () => {
    const gh = new GitHubPullRequests({ token: 't', baseUrl });
    await expect(
      gh.merge({ repositoryUrl: 'https://github.com/acme/infra.git', number: 43, message: 'Merge' }),
    ).rejects.toThrow(/not mergeable/);
  });
});
