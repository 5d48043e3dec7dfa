// The engine's network. A sandboxed engine process runs in a network namespace of its own
// (bubblewrap --unshare-net) that holds a loopback interface and nothing else: no route to the
// worker's loopback services (the object store, PostgreSQL, Temporal, the API), to link-local
// metadata endpoints or to the private network. Its only ways out are the listeners the relay
// (worker/egress-relay) opens inside it, each relayed to a Unix socket of this gate:
//
// - the run's own destinations on the worker's loopback — its state server, the configured cloud
//   emulator, what `engine.egress_allow` names — each at the same address inside, relayed to that
//   address and nowhere else;
// - an HTTP proxy (HTTPS_PROXY/HTTP_PROXY inside; Go's HTTP clients and git's curl honour it, and
//   never use it for loopback), which connects only to a destination this run may reach: a host of
//   its cloud's domains on a public address, or a destination named exactly. Anything else is
//   refused with 403 and recorded: the run's log and its error say which destination was refused.
//
// A connection to any other loopback port finds nothing listening inside the namespace; the gate
// reads those refusals from the engine's output (`dial tcp 127.0.0.1:5432: connect: connection
// refused`) and names them too.
import { mkdtempSync, rmSync } from 'node:fs';
import {
  createServer as createHttpServer,
  request as httpRequest,
  type IncomingMessage,
  type ServerResponse,
} from 'node:http';
import { connect, createServer, isIP, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Duplex } from 'node:stream';
import { lookup } from 'node:dns/promises';
import { isNonPublicAddress } from '../shared/infra/network-targets';

/** Where the gate's sockets appear inside the sandbox. */
export const EGRESS_DIR_IN_SANDBOX = '/kumoss-egress';

/** A destination: a host (name or address) and a port. */
export interface Destination {
  host: string;
  port: number;
}

/** What one engine process may reach. */
export interface EgressRules {
  /** Destinations named exactly (`host:port`): loopback ones relayed at the same address inside. */
  endpoints: Destination[];
  /** Domains whose hosts the proxy reaches on public addresses (`amazonaws.com`: it and below). */
  domains: string[];
}

/** The cloud's own API domains: what a run with that cloud's credentials talks to. */
export const CLOUD_DOMAINS: Record<string, string[]> = {
  aws: ['amazonaws.com', 'amazonaws.com.cn', 'api.aws'],
  gcp: ['googleapis.com'],
  azure: ['management.azure.com', 'login.microsoftonline.com', 'azure.com', 'azure.net', 'windows.net'],
  oci: ['oraclecloud.com'],
};

/** The engine environment's keys whose values are endpoints Kumoss configured (never the repository's). */
const ENDPOINT_KEYS = /^(AWS_ENDPOINT_URL(_[A-Z0-9_]+)?|TF_HTTP_(LOCK_|UNLOCK_)?ADDRESS)$/;

function unbracket(host: string): string {
  return host.replace(/^\[|\]$/g, '').toLowerCase();
}

export function isLoopbackHost(host: string): boolean {
  const h = unbracket(host);
  if (h === 'localhost') return true;
  if (isIP(h) === 4) return h.startsWith('127.');
  return h === '::1';
}

/** A URL's destination (its port or the scheme's). */
export function destinationOfUrl(raw: string): Destination | undefined {
  let u: URL;
  try {
    u = new URL(raw);
  } catch {
    return undefined;
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') return undefined;
  const port = u.port ? Number(u.port) : u.protocol === 'https:' ? 443 : 80;
  return { host: unbracket(u.hostname), port };
}

/**
 * `engine.egress_allow` entries: `host:port` or a URL (that destination exactly), `.domain` or
 * `*.domain` (hosts below it on public addresses).
 */
export function parseEgressAllow(entries: string[]): EgressRules {
  const rules: EgressRules = { endpoints: [], domains: [] };
  for (const raw of entries) {
    const e = raw.trim();
    if (!e) continue;
    if (e.startsWith('*.') || e.startsWith('.')) {
      rules.domains.push(e.replace(/^\*?\./, '').toLowerCase());
      continue;
    }
    const d = e.includes('://') ? destinationOfUrl(e) : destinationOfUrl(`http://${e}`);
    if (d && (e.includes('://') || /:\d+$/.test(e))) rules.endpoints.push(d);
    else throw new Error(`engine.egress_allow: ${raw} is neither host:port, a URL nor .domain`);
  }
  return rules;
}

/** The endpoints of an engine environment (its state server, its cloud's configured endpoint). */
export function endpointsOfEnv(env: Record<string, string>): Destination[] {
  const out: Destination[] = [];
  for (const [k, v] of Object.entries(env))
    if (ENDPOINT_KEYS.test(k)) {
      const d = destinationOfUrl(v);
      if (d) out.push(d);
    }
  return out;
}

export function mergeRules(...all: EgressRules[]): EgressRules {
  const seen = new Set<string>();
  const endpoints: Destination[] = [];
  for (const r of all)
    for (const d of r.endpoints) {
      const k = `${d.host}:${d.port}`;
      if (seen.has(k)) continue;
      seen.add(k);
      endpoints.push(d);
    }
  return { endpoints, domains: [...new Set(all.flatMap((r) => r.domains))] };
}

const show = (d: Destination) => (isIP(d.host) === 6 ? `[${d.host}]:${d.port}` : `${d.host}:${d.port}`);

/** What the engine's output says it could not reach inside the namespace (nothing listening, no route). */
export function refusedDials(output: string): string[] {
  const out = new Set<string>();
  for (const m of output.matchAll(
    // The engine wraps long lines of its diagnostics: any whitespace may separate the words.
    /dial\s+tcp\s+(\[[0-9a-f:]+\]|[\w.-]+):(\d+):\s+connect:\s+(connection\s+refused|network\s+is\s+unreachable)/gi,
  ))
    out.add(`${m[1]}:${m[2]}`);
  return [...out];
}

/** One relayed listener inside the namespace: its address there and its socket's name. */
export interface EgressListener {
  address: string;
  socket: string;
}

/**
 * The gate of one engine process: its sockets (a directory bound into the sandbox), what it
 * refused, and `close()` once the process is gone.
 */
export class EgressGate {
  readonly refused: string[] = [];
  readonly listeners: EgressListener[] = [];
  /** The proxy's port inside the namespace. */
  proxyPort = 0;
  private readonly servers: Server[] = [];
  private readonly sockets = new Set<Duplex>();

  private constructor(
    readonly dir: string,
    readonly rules: EgressRules,
  ) {}

  static async open(rules: EgressRules): Promise<EgressGate> {
    const gate = new EgressGate(mkdtempSync(join(tmpdir(), 'kumoss-egress-')), rules);
    try {
      await gate.start();
    } catch (err) {
      await gate.close();
      throw err;
    }
    return gate;
  }

  /** The environment that sends the engine's HTTP through the proxy (loopback never is). */
  proxyEnv(): Record<string, string> {
    const proxy = `http://127.0.0.1:${this.proxyPort}`;
    const noProxy = 'localhost,127.0.0.1,::1';
    return {
      HTTPS_PROXY: proxy,
      HTTP_PROXY: proxy,
      https_proxy: proxy,
      http_proxy: proxy,
      NO_PROXY: noProxy,
      no_proxy: noProxy,
    };
  }

  /** The refusals as the run's log states them. */
  describe(extra: string[] = []): string[] {
    const known = new Set(this.rules.endpoints.map(show));
    const listening = new Set(this.listeners.map((l) => l.address));
    const dials = extra.filter((d) => !known.has(d) && !listening.has(d));
    return [...new Set([...this.refused, ...dials.map((d) => `${d} (not a destination of this run)`)])];
  }

  private listen(server: Server, name: string): Promise<void> {
    const path = join(this.dir, name);
    this.servers.push(server);
    server.on('connection', (s: Socket) => {
      this.sockets.add(s);
      s.once('close', () => this.sockets.delete(s));
    });
    return new Promise((resolve, reject) => {
      server.once('error', reject);
      server.listen(path, () => {
        server.off('error', reject);
        resolve();
      });
    });
  }

  private async start(): Promise<void> {
    let n = 0;
    const ports = new Set<number>();
    for (const d of this.rules.endpoints) {
      if (!isLoopbackHost(d.host) || ports.has(d.port)) continue;
      ports.add(d.port);
      const name = `d${n++}.sock`;
      const target = { host: d.host === 'localhost' ? '127.0.0.1' : d.host, port: d.port };
      const server = createServer((inside) => {
        const out = connect(target);
        this.sockets.add(out);
        out.once('close', () => this.sockets.delete(out));
        pipeBoth(inside, out);
      });
      await this.listen(server, name);
      this.listeners.push({
        address: `127.0.0.1:${d.port}`,
        socket: `${EGRESS_DIR_IN_SANDBOX}/${name}`,
      });
    }
    this.proxyPort = [3128, 8888, 18080, 28080].find((p) => !ports.has(p)) ?? 38080;
    const proxy = createHttpServer((req, res) => void this.forward(req, res));
    proxy.on(
      'connect',
      (req: IncomingMessage, socket: Duplex, head: Buffer) => void this.tunnel(req, socket, head),
    );
    await this.listen(proxy, 'proxy.sock');
    this.listeners.push({
      address: `127.0.0.1:${this.proxyPort}`,
      socket: `${EGRESS_DIR_IN_SANDBOX}/proxy.sock`,
    });
  }

  /**
   * Where a connection to `d` goes: the address it was checked at, or why it is refused. A
   * destination named exactly is reached as named; a host under a domain only on a public address.
   */
  async decide(d: Destination): Promise<{ address: string } | { refused: string }> {
    const named = this.rules.endpoints.some((e) => e.host === d.host && e.port === d.port);
    if (named) return { address: d.host === 'localhost' ? '127.0.0.1' : d.host };
    const host = d.host;
    const inDomain = this.rules.domains.some((dom) => host === dom || host.endsWith(`.${dom}`));
    if (!inDomain || isIP(host)) return { refused: `${show(d)} (not a destination of this run)` };
    let addresses: { address: string }[];
    try {
      addresses = await lookup(host, { all: true, verbatim: true });
    } catch {
      return { refused: `${show(d)} (does not resolve)` };
    }
    const bad = addresses.find((a) => isNonPublicAddress(a.address));
    const first = addresses[0];
    if (bad || !first)
      return { refused: `${show(d)} (resolves to ${bad?.address ?? 'nothing'}, not a public address)` };
    return { address: first.address };
  }

  private refuse(why: string): string {
    this.refused.push(why);
    return `Kumoss egress refused ${why}\n`;
  }

  private async tunnel(req: IncomingMessage, socket: Duplex, head: Buffer): Promise<void> {
    this.sockets.add(socket);
    socket.once('close', () => this.sockets.delete(socket));
    socket.on('error', () => undefined);
    const d = destinationOfUrl(`http://${req.url ?? ''}`);
    const decision = d ? await this.decide(d) : { refused: `${req.url ?? ''} (not host:port)` };
    if ('refused' in decision) {
      const body = this.refuse(decision.refused);
      socket.end(
        `HTTP/1.1 403 Forbidden\r\ncontent-type: text/plain\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
      );
      return;
    }
    const out = connect({ host: decision.address, port: (d as Destination).port });
    this.sockets.add(out);
    out.once('close', () => this.sockets.delete(out));
    out.once('connect', () => {
      socket.write('HTTP/1.1 200 Connection Established\r\n\r\n');
      if (head.length) out.write(head);
      pipeBoth(socket, out);
    });
    out.once('error', (err) => {
      socket.end(`HTTP/1.1 502 Bad Gateway\r\nconnection: close\r\n\r\n${err.message}\n`);
    });
  }

  /** An absolute-form request (`GET http://host/…`): an HTTP destination through the proxy. */
  private async forward(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const d = req.url ? destinationOfUrl(req.url) : undefined;
    const decision = d ? await this.decide(d) : { refused: `${req.url ?? ''} (not an absolute URL)` };
    if ('refused' in decision) {
      const body = this.refuse(decision.refused);
      res.writeHead(403, { 'content-type': 'text/plain', 'content-length': Buffer.byteLength(body) });
      res.end(body);
      return;
    }
    const url = new URL(req.url as string);
    const headers = { ...req.headers };
    delete headers['proxy-connection'];
    delete headers['proxy-authorization'];
    const out = httpRequest(
      {
        host: decision.address,
        port: (d as Destination).port,
        method: req.method,
        path: `${url.pathname}${url.search}`,
        headers,
      },
      (upstream) => {
        res.writeHead(upstream.statusCode ?? 502, upstream.headers);
        upstream.pipe(res);
      },
    );
    out.on('error', (err) => {
      if (!res.headersSent) res.writeHead(502, { 'content-type': 'text/plain' });
      res.end(`${err.message}\n`);
    });
    req.pipe(out);
  }

  async close(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    await Promise.all(this.servers.map((s) => new Promise((resolve) => s.close(() => resolve(undefined)))));
    rmSync(this.dir, { recursive: true, force: true });
  }
}

function pipeBoth(a: Duplex, b: Duplex): void {
  a.on('error', () => b.destroy());
  b.on('error', () => a.destroy());
  a.pipe(b);
  b.pipe(a);
}
