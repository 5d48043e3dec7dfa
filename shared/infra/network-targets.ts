// Targets Kumoss connects to on a user's word — repository URLs, webhook endpoints — must not be
// the machine's own neighbourhood: a private, loopback, link-local (cloud metadata at
// 169.254.169.254) or otherwise non-public address would make Kumoss a scanner of the network it
// runs in. Such a target is refused unless the operator's configuration names it
// (`security.private_targets_allowed`; the embedded git host and Gitea are always named).
// A name is resolved when it is checked; one that does not resolve is let through (nothing can be
// reached through it now; the connection attempt will fail on its own).
import { lookup } from 'node:dns/promises';
import { BlockList, isIP } from 'node:net';

const NON_PUBLIC = new BlockList();
for (const [net, prefix] of [
  ['0.0.0.0', 8],
  ['10.0.0.0', 8],
  ['100.64.0.0', 10],
  ['127.0.0.0', 8],
  ['169.254.0.0', 16],
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  ['192.168.0.0', 16],
  ['198.18.0.0', 15],
  ['224.0.0.0', 4],
  ['240.0.0.0', 4],
] as const)
  NON_PUBLIC.addSubnet(net, prefix, 'ipv4');
for (const [net, prefix] of [
  ['::', 128],
  ['::1', 128],
  ['fc00::', 7],
  ['fe80::', 10],
  ['ff00::', 8],
] as const)
  NON_PUBLIC.addSubnet(net, prefix, 'ipv6');

/** Whether `ip` is private, loopback, link-local, multicast or reserved. */
export function isNonPublicAddress(ip: string): boolean {
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(ip);
  if (mapped?.[1]) return NON_PUBLIC.check(mapped[1], 'ipv4');
  const family = isIP(ip);
  if (family === 0) return false;
  return NON_PUBLIC.check(ip, family === 4 ? 'ipv4' : 'ipv6');
}

/** Which non-public targets are allowed: origins (`https://10.0.0.5:8443`) or bare hosts (any port). */
export interface TargetPolicy {
  allowed: string[];
}

function allowedBy(url: URL, policy: TargetPolicy): boolean {
  return policy.allowed.some((entry) => {
    if (entry.includes('://')) {
      try {
        return new URL(entry).origin === url.origin;
      } catch {
        return false;
      }
    }
    return entry.toLowerCase() === url.hostname.replace(/^\[|\]$/g, '').toLowerCase();
  });
}

/** A target's check: why it is refused, or the address it was checked at (absent: the policy names it). */
export type TargetCheck =
  { refused: string } | { refused?: undefined; address?: { address: string; family: 4 | 6 } };

/**
 * Checks `raw` as a target: refused when its host is, or resolves to, a non-public address that the
 * policy does not name; else the address it was checked at — what a connection must use, so that
 * a name resolving elsewhere a moment later (DNS rebinding) reaches nothing it was not checked for.
 */
export async function checkTarget(raw: string, policy: TargetPolicy): Promise<TargetCheck> {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return { refused: 'is not a URL' };
  }
  if (allowedBy(url, policy)) return {};
  const host = url.hostname.replace(/^\[|\]$/g, '');
  let addresses: { address: string; family: number }[];
  if (isIP(host)) addresses = [{ address: host, family: isIP(host) }];
  else {
    try {
      addresses = await lookup(host, { all: true, verbatim: true });
    } catch {
      return {};
    }
  }
  const bad = addresses.find((a) => isNonPublicAddress(a.address))?.address;
  if (bad)
    return {
      refused: `${host} ${host === bad ? 'is' : `resolves to ${bad},`} a private, loopback or link-local address; such targets are refused unless security.private_targets_allowed names them`,
    };
  const first = addresses[0];
  return first ? { address: { address: first.address, family: first.family === 6 ? 6 : 4 } } : {};
}

/** Why `raw` is refused as a target, or undefined when it may be used (checkTarget). */
export async function refusedTarget(raw: string, policy: TargetPolicy): Promise<string | undefined> {
  return (await checkTarget(raw, policy)).refused;
}

/**
 * A `lookup` for node:http(s) that answers `address` whatever it is asked: a connection to the
 * address a target was checked at.
 */
export function pinnedLookup(address: { address: string; family: 4 | 6 }) {
  return (
    _host: string,
    options: { all?: boolean },
    callback: (
      err: Error | null,
      address: string | { address: string; family: number }[],
      family?: number,
    ) => void,
  ): void => {
    if (options.all) callback(null, [address]);
    else callback(null, address.address, address.family);
  };
}
