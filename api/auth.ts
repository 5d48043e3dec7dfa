// Authentication on every request — `Authorization: Bearer <token>` (tokens stored hashed), or the
// web application's session cookie — and role checks: developer < devops < admin. A request that
// authenticates with the cookie and changes something must also carry `X-Kumoss-CSRF: 1` and, when
// the browser sends an Origin, come from the API's own origin: a cross-site page cannot set that
// header without a CORS preflight this API never grants, and SameSite=Strict keeps the cookie off
// cross-site requests in the first place.
import type { NextFunction, Request, RequestHandler, Response } from 'express';
import type { Db } from '../shared/infra/db';
import { findUserByAuthSession } from '../shared/infra/db/auth-sessions';
import { findUserByToken, roleAtLeast, type Role, type User } from '../shared/infra/db/users';
import { withOrganization } from '../shared/infra/payload-codec';
import { HttpError } from './errors';
import type { EventsHub } from './events-hub';

declare module 'express-serve-static-core' {
  interface Request {
    user?: User;
  }
}

/** The web application's session cookie (httpOnly, SameSite=Strict; routes/auth-session.ts). */
export const SESSION_COOKIE = 'kumoss_session';
export const CSRF_HEADER = 'x-kumoss-csrf';
const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

/** The value of one cookie of the request, if present. */
export function cookieValue(req: Request, name: string): string | undefined {
  for (const part of (req.get('cookie') ?? '').split(';')) {
    const i = part.indexOf('=');
    if (i > 0 && part.slice(0, i).trim() === name) return decodeURIComponent(part.slice(i + 1).trim());
  }
  return undefined;
}

function sameOrigin(req: Request): boolean {
  const origin = req.get('origin');
  if (!origin) return true; // not a browser's cross-origin request (browsers send Origin on them)
  try {
    return new URL(origin).host === req.get('host');
  } catch {
    return false;
  }
}

/** The payload on the store's channel that says users changed (a role, a revoked or new token). */
export const USERS_CHANGED = 'users:changed';
const TOKEN_CACHE_MS = 30_000;

interface TokenCache {
  hub: EventsHub;
  users: Map<string, { user: User; at: number }>;
}
const tokenCaches = new WeakMap<Db, TokenCache>();

/**
 * Remembers which user a bearer token is, for at most 30 s and only while the store's
 * notifications arrive: a role change or a revoked token (USERS_CHANGED) empties it at once.
 */
export function cacheTokens(db: Db, hub: EventsHub): void {
  const users = new Map<string, { user: User; at: number }>();
  tokenCaches.set(db, { hub, users });
  hub.onChange((id) => {
    if (id === null || id === USERS_CHANGED) users.clear();
  });
}

function userByToken(db: Db, token: string): Promise<User | undefined> {
  const cache = tokenCaches.get(db);
  if (!cache?.hub.connected) return findUserByToken(db, token);
  const hit = cache.users.get(token);
  if (hit && Date.now() - hit.at < TOKEN_CACHE_MS) return Promise.resolve(hit.user);
  return findUserByToken(db, token).then((user) => {
    if (user) {
      if (cache.users.size >= 10_000) cache.users.clear();
      cache.users.set(token, { user, at: Date.now() });
    }
    return user;
  });
}

export function authenticate(db: Db): RequestHandler {
  return (req: Request, _res: Response, next: NextFunction) => {
    const header = req.get('authorization') ?? '';
    const m = /^Bearer\s+(\S+)$/i.exec(header);
    const cookie = m ? undefined : cookieValue(req, SESSION_COOKIE);
    if (!m?.[1] && !cookie) {
      next(
        new HttpError(
          401,
          'unauthorized',
          'Send a valid token as "Authorization: Bearer <token>", or sign in.',
        ),
      );
      return;
    }
    if (cookie && !SAFE_METHODS.has(req.method) && (req.get(CSRF_HEADER) !== '1' || !sameOrigin(req))) {
      next(
        new HttpError(
          403,
          'csrf',
          `A signed-in browser request that changes something must come from this origin with "${CSRF_HEADER}: 1".`,
        ),
      );
      return;
    }
    (m?.[1] ? userByToken(db, m[1]) : findUserByAuthSession(db, cookie ?? ''))
      .then((user) => {
        if (!user) {
          throw new HttpError(
            401,
            'unauthorized',
            m ? 'The token is not valid.' : 'The session has ended; sign in again.',
          );
        }
        req.user = user;
        // What this request encrypts for a workflow the codec cannot place by its id is the
        // caller's organization's (shared/infra/payload-codec.ts).
        withOrganization(user.organization_uuid, next);
      })
      .catch(next);
  };
}

/**
 * Whether the credential this request authenticated with still names the same user with the same
 * role, read from the store (not the token cache): an open event stream asks it when users change,
 * and ends when the answer is no (a revoked token, a signed-out or revoked browser session, a role
 * changed).
 */
export async function stillAuthenticated(db: Db, req: Request): Promise<boolean> {
  const was = req.user;
  if (!was) return false;
  const m = /^Bearer\s+(\S+)$/i.exec(req.get('authorization') ?? '');
  const cookie = m ? undefined : cookieValue(req, SESSION_COOKIE);
  const now = m?.[1]
    ? await findUserByToken(db, m[1])
    : cookie
      ? await findUserByAuthSession(db, cookie)
      : undefined;
  return now?.user_uuid === was.user_uuid && now.role === was.role;
}

const ROLE_MESSAGES: Record<Role, string> = {
  developer: 'Requires the developer operation role.',
  devops: 'Requires the devops operation role.',
  admin: 'Requires the admin operation role.',
};

/** Throws the 403 of a caller below `role` (for checks that depend on the request body). */
export function assertRole(user: User, role: Role): void {
  if (!roleAtLeast(user.role, role)) throw new HttpError(403, 'forbidden', ROLE_MESSAGES[role]);
}

export function requireRole(role: Role): RequestHandler {
  return (req, _res, next) => {
    if (!req.user) return next(new HttpError(401, 'unauthorized', 'Not authenticated.'));
    try {
      assertRole(req.user, role);
    } catch (err) {
      return next(err);
    }
    next();
  };
}

export function currentUser(req: Request): User {
  if (!req.user) throw new HttpError(401, 'unauthorized', 'Not authenticated.');
  return req.user;
}

/** The caller's organization: every registry route reads and writes within it only. */
export function callerOrganization(req: Request): string {
  return currentUser(req).organization_uuid;
}
