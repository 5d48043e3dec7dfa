// The web application's sign-in: POST /api/v1/auth/session exchanges the token `npx kumoss user add`
// printed for a session cookie (httpOnly — script cannot read it; SameSite=Strict — no cross-site
// request carries it; Secure behind HTTPS); DELETE signs out and revokes the session;
// GET /api/v1/auth/me says who is signed in. The token itself never travels again.
import { Router } from 'express';
import { z } from 'zod';
import type { Db } from '../../shared/infra/db';
import {
  AUTH_SESSION_HOURS,
  createAuthSession,
  revokeAuthSession,
} from '../../shared/infra/db/auth-sessions';
import { findUserByToken } from '../../shared/infra/db/users';
import { authenticate, cookieValue, CSRF_HEADER, currentUser, SESSION_COOKIE } from '../auth';
import { HttpError } from '../errors';
import { parseBody } from '../validation';
import { meSchema, signedInSchema } from '../../shared/contracts';
import { operation, route } from '../contract';

const signInSchema = z.object({ token: z.string().trim().min(1, 'is required').max(200) }).strict();

export const authOperations = {
  signIn: operation({
    method: 'post',
    path: '/api/v1/auth/session',
    summary:
      'Sign in (web application): exchanges a token for an httpOnly, SameSite=Strict session cookie; needs `X-Kumoss-CSRF: 1`',
    body: signInSchema,
    responses: { 201: { description: 'Signed in; the cookie is set', schema: signedInSchema } },
    errors: [400, 401, 403],
  }),
  signOut: operation({
    method: 'delete',
    path: '/api/v1/auth/session',
    summary: 'Sign out: revokes the session and clears the cookie',
    responses: { 204: { description: 'Signed out' } },
    errors: [401, 403],
  }),
  me: operation({
    method: 'get',
    path: '/api/v1/auth/me',
    summary: 'Who is signed in',
    responses: { 200: { description: 'The signed-in user', schema: meSchema } },
    errors: [401],
  }),
};

export function createAuthSessionRouter(deps: { db: Db; temporalUiUrl?: string }): Router {
  const router = Router();

  route(router, authOperations.signIn, async (req, res) => {
    // Signing in changes state too: the same header rule, so no other site can sign a browser in.
    if (req.get(CSRF_HEADER) !== '1') {
      throw new HttpError(403, 'csrf', `Sign in from the web application (it sends "${CSRF_HEADER}: 1").`);
    }
    const { token } = parseBody(signInSchema, req.body);
    const user = await findUserByToken(deps.db, token);
    if (!user) throw new HttpError(401, 'unauthorized', 'The token is not valid.');
    const session = await createAuthSession(deps.db, user);
    res.cookie(SESSION_COOKIE, session.id, {
      httpOnly: true,
      sameSite: 'strict',
      secure: req.secure,
      path: '/',
      maxAge: AUTH_SESSION_HOURS * 3600_000,
    });
    res.status(201).json({
      user: { name: user.name, role: user.role, organization_uuid: user.organization_uuid },
      expires_at: session.expiresAt.toISOString(),
    });
  });

  route(router, authOperations.signOut, authenticate(deps.db), async (req, res) => {
    const id = cookieValue(req, SESSION_COOKIE);
    if (id) await revokeAuthSession(deps.db, id);
    res.clearCookie(SESSION_COOKIE, { httpOnly: true, sameSite: 'strict', secure: req.secure, path: '/' });
    res.status(204).end();
  });

  route(router, authOperations.me, authenticate(deps.db), (req, res) => {
    const user = currentUser(req);
    res.json({
      user: { name: user.name, role: user.role, organization_uuid: user.organization_uuid },
      // Where the web application links each run: an admin's only (the Web UI shows payloads
      // through the codec endpoint, which decodes for an admin alone).
      temporal_ui_url: user.role === 'admin' ? (deps.temporalUiUrl ?? '') : '',
    });
  });
  return router;
}
